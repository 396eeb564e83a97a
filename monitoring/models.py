from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from clusters.models import Cluster
from tenants.models import Team


class IdlePolicy(models.Model):
    """A team's rule for pods whose GPUs sit idle: whether its leads hear about them, and
    whether the portal stops them once idle past a limit (after warning first)."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="idle_policy")
    notify_leads = models.BooleanField(
        default=True,
        help_text="Tell the team's leads (in the portal, and by e-mail) when a pod "
        "holding GPUs goes idle.",
    )
    stop_after_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(10), MaxValueValidator(60 * 24 * 30)],
        help_text="Stop a portal-managed pod (its Job) idle this long. Empty: never stop.",
    )
    warn_minutes_before_stop = models.PositiveIntegerField(
        default=15,
        validators=[MinValueValidator(1), MaxValueValidator(60 * 24)],
        help_text="Warn the leads this long before stopping.",
    )
    stop_services = models.BooleanField(
        default=False,
        help_text="Also stop (scale to zero) inference services idle that long. Off: an idle "
        "service is only reported to the leads.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        verbose_name_plural = "idle policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(stop_after_minutes__isnull=True)
                | Q(stop_after_minutes__gt=F("warn_minutes_before_stop")),
                name="idle_policy_warning_before_stop",
            ),
        ]

    def __str__(self) -> str:
        if self.stop_after_minutes is None:
            return f"{self.team}: notify only"
        return f"{self.team}: stop after {self.stop_after_minutes} min idle"


class IdlePod(models.Model):
    """One stretch of time a pod held GPUs and left them idle, from the first check that found
    it idle until a check found it busy again or gone (``ended_at``). What the leads were told,
    and whether the portal stopped it, is recorded on the row so each happens once."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="idle_pods")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="idle_pods")
    namespace = models.CharField(max_length=63)
    pod = models.CharField(max_length=253)
    gpus = models.PositiveIntegerField(
        default=0, help_text="Units held: whole GPUs, MIG slices and shared-GPU replicas, one each."
    )
    gpu_equivalents = models.FloatField(
        null=True, blank=True, help_text="What the pod holds as GPU equivalents (a 1g.10gb: 1/7)."
    )
    gpus_described = models.CharField(
        max_length=200, blank=True, help_text='What the pod holds in words: "1 × 1g.10gb slice".'
    )
    average_utilisation = models.FloatField(help_text="Over the cluster's idle window, in %.")
    first_idle_at = models.DateTimeField()
    last_idle_at = models.DateTimeField()
    notified_at = models.DateTimeField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    stop_error = models.TextField(blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-first_idle_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "pod"],
                condition=Q(ended_at__isnull=True),
                name="idle_pod_one_open_episode",
            ),
            models.CheckConstraint(
                condition=Q(last_idle_at__gte=F("first_idle_at")),
                name="idle_pod_last_after_first",
            ),
        ]
        indexes = [models.Index(fields=["team", "ended_at"], name="idle_pod_team_open_idx")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod} idle since {self.first_idle_at:%Y-%m-%d %H:%M}"

    @property
    def gpus_text(self) -> str:
        """What the pod holds, as notices say it ("1 x 1g.10gb slice (1/7 GPU)"); an episode
        recorded before kinds were told apart says its count."""
        return self.gpus_described or f"{self.gpus} GPU{'' if self.gpus == 1 else 's'}"


class Notification(models.Model):
    """A message for one user in the portal (shown in the navigation until read)."""

    class Kind(models.TextChoices):
        IDLE = "idle", "GPUs idle"
        IDLE_WARNING = "idle_warning", "Idle pod will be stopped"
        IDLE_STOPPED = "idle_stopped", "Idle pod stopped"
        GRANT_ENDING = "grant_ending", "Grant ends soon"
        BUDGET_WARNING = "budget_warning", "Budget 80% spent"
        BUDGET_EXHAUSTED = "budget_exhausted", "Budget spent"
        JOB_PREEMPTED = "job_preempted", "Job preempted"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="notifications"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    subject = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True)
    idle_pod = models.ForeignKey(
        IdlePod, on_delete=models.SET_NULL, null=True, blank=True, related_name="notifications"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "read_at"], name="notification_unread_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    kind__in=[
                        "idle",
                        "idle_warning",
                        "idle_stopped",
                        "grant_ending",
                        "budget_warning",
                        "budget_exhausted",
                        "job_preempted",
                    ]
                ),
                name="notification_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.subject}"
