from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from gpujobs import manifests, observe
from gpujobs.specs import MAX_BACKOFF_LIMIT, MAX_GPUS_PER_JOB, MAX_RUNTIME_SECONDS
from portal.validators import extended_resource_name_validator
from tenants.models import Team


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
        validators=[MinValueValidator(1), MaxValueValidator(MAX_GPUS_PER_JOB)]
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
