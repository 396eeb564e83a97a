from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE, GUARANTEED, OPPORTUNISTIC
from core.validators import extended_resource_name_validator
from gpujobs import manifests, observe
from gpujobs.specs import MAX_BACKOFF_LIMIT, MAX_RUNTIME_SECONDS, PRIORITY_HELP
from tenants.models import Team
from workloads.specs import MAX_GPUS_PER_POD


class GpuJob(models.Model):
    """One GPU job a team member asked the portal to run: what to run, where, and what the
    cluster has made of it so far (written by the worker and the watcher)."""

    class State(models.TextChoices):
        QUEUED = observe.State.QUEUED, "Queued"
        SUBMITTED = observe.State.SUBMITTED, "Submitted"
        PENDING = observe.State.PENDING, "Pending"
        RUNNING = observe.State.RUNNING, "Running"
        SUCCEEDED = observe.State.SUCCEEDED, "Succeeded"
        FAILED = observe.State.FAILED, "Failed"
        CANCELLED = observe.State.CANCELLED, "Cancelled"

    class Priority(models.TextChoices):
        """The kind of work, on a cluster whose quota Kueue enforces (see ``PRIORITY_HELP``)."""

        GUARANTEED = GUARANTEED, "Guaranteed"
        OPPORTUNISTIC = OPPORTUNISTIC, "Opportunistic"

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="gpu_jobs")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="gpu_jobs")
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="gpu_jobs"
    )
    name = models.CharField(
        max_length=63,
        help_text="A short name for people; the Job's name on the cluster comes from the id.",
    )

    # What to run.
    image = models.CharField(max_length=500)
    command = models.JSONField(default=list, blank=True, help_text="Replaces the entrypoint.")
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=list, blank=True, help_text='[{"name": ..., "value": ...}]')
    gpus = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_GPUS_PER_POD)]
    )
    gpu_resource = models.CharField(
        max_length=253, default=DEFAULT_GPU_RESOURCE, validators=[extended_resource_name_validator]
    )
    gpu_model = models.CharField(max_length=200, blank=True)
    cpu_cores = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True)
    memory_gib = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    max_runtime_seconds = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_RUNTIME_SECONDS)]
    )
    backoff_limit = models.PositiveSmallIntegerField(
        default=0, validators=[MaxValueValidator(MAX_BACKOFF_LIMIT)]
    )
    preprocess = models.JSONField(
        null=True,
        blank=True,
        help_text="Optional CPU-only container: image, command, args, mode (beside or before), "
        "cpu_cores, memory_gib.",
    )
    annotations = models.JSONField(default=dict, blank=True, help_text="Extra pod annotations.")
    priority = models.CharField(
        max_length=16,
        choices=Priority.choices,
        default=Priority.GUARANTEED,
        help_text=PRIORITY_HELP,
    )

    # What became of it.
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True, help_text="Why it waits or how it ended, in words.")
    node = models.CharField(max_length=253, blank=True)
    pods = models.JSONField(default=list, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    kube_uid = models.CharField(max_length=64, blank=True, help_text="The Job's uid once created.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    claimed_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker last took the job to create it."
    )
    submit_attempts = models.PositiveIntegerField(default=0)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="gpu_jobs_cancelled",
    )

    # What Kueue made of it (Kueue mode only; written by the submit task and the watcher).
    queue_name = models.CharField(
        max_length=63,
        blank=True,
        help_text="The team's LocalQueue its Job was created in; empty under quota only.",
    )
    admitted_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When Kueue last admitted it (its run time counts from then).",
    )
    admitted_flavor = models.CharField(
        max_length=253, blank=True, help_text="The ResourceFlavor of its GPUs when last admitted."
    )
    preemptions = models.PositiveIntegerField(
        default=0, help_text="Times Kueue preempted it (and put it back in the queue)."
    )
    preempted_at = models.DateTimeField(null=True, blank=True)
    preempted_by = models.CharField(
        max_length=300, blank=True, help_text="Who took its GPUs the last time it was preempted."
    )
    preemption_reason = models.CharField(
        max_length=200, blank=True, help_text="Why, in Kueue's words."
    )
    preemption_stopped_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its pods had stopped after its last preemption: told at preempted_at "
        "(SIGTERM), stopped at the latest when the grace period was up (SIGKILL).",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "cluster", "state"], name="gpu_job_team_usage_idx"),
            models.Index(fields=["state", "created_at"], name="gpu_job_state_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=1), name="gpu_job_gpus_positive"),
            models.CheckConstraint(
                condition=Q(max_runtime_seconds__gte=1), name="gpu_job_runtime_positive"
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "queued",
                        "submitted",
                        "pending",
                        "running",
                        "succeeded",
                        "failed",
                        "cancelled",
                    ]
                ),
                name="gpu_job_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(cpu_cores__isnull=True) | Q(cpu_cores__gt=0),
                name="gpu_job_cpu_positive",
            ),
            models.CheckConstraint(
                condition=Q(memory_gib__isnull=True) | Q(memory_gib__gt=0),
                name="gpu_job_memory_positive",
            ),
            models.CheckConstraint(
                condition=Q(priority__in=["guaranteed", "opportunistic"]),
                name="gpu_job_priority_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name} ({self.state})"

    @property
    def namespace(self) -> str:
        return self.team.slug

    @property
    def kube_name(self) -> str:
        return manifests.job_name(self.pk)

    @property
    def is_final(self) -> bool:
        return self.state in observe.FINAL_STATES

    @property
    def holds_quota(self) -> bool:
        """Counted against the team's quota: anything not finished may still hold GPUs."""
        return self.state in observe.ACTIVE_STATES


class QueueSnapshot(models.Model):
    """What Kueue said about one cluster's queues when the watcher last looked: per ClusterQueue
    of the portal its cohort, quota and usage per GPU flavor, the GPU model of each flavor, the
    pending workloads in Kueue's order (from its visibility API), and whether Kueue answered.

    Written by the watcher every few seconds when something changed; the pages and the API read
    it to explain, in words and numbers, why a job waits and where it stands in the queues. The
    shapes of the JSON fields are ``gpujobs.queues.Snapshot``'s."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="queue_snapshot")
    taken_at = models.DateTimeField()
    flavors = models.JSONField(default=dict, blank=True, help_text="GPU flavor -> GPU model.")
    cluster_queues = models.JSONField(default=list, blank=True)
    pending = models.JSONField(default=list, blank=True)
    kueue_error = models.TextField(
        blank=True, help_text="Why Kueue is not admitting, when it does not answer."
    )
    kueue_error_since = models.DateTimeField(null=True, blank=True)
    held_outside = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per team, the GPUs its pods hold that Kueue did not admit.",
    )

    def __str__(self) -> str:
        return f"Kueue queues of {self.cluster.name} at {self.taken_at:%H:%M:%S}"
