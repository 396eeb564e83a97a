"""Interactive sessions: a notebook server a member opens through the portal, holding its GPUs
only while it runs, with a home volume that outlives it.

A session runs as one ``batch/v1`` Job per run (``session-<id>-<run>``): stopping deletes the
Job and keeps the member's home volume; resuming makes the next run's Job, which mounts the
same volume. The notebook server trusts only the portal: it asks every request for ``token``,
which the portal's proxy adds (``interactive.proxy``) and nobody else is shown.
"""

from __future__ import annotations

import datetime
import secrets

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.validators import extended_resource_name_validator
from tenants.models import Team
from workloads.specs import MAX_GPUS_PER_POD

MAX_LIFETIME_SECONDS = 7 * 24 * 3600
MAX_HOME_GIB = 10_000
TOKEN_BYTES = 32


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


class InteractiveSession(models.Model):
    """One member's notebook session on one cluster: what it runs with, and what became of its
    current run (written by the worker, the watcher and the culling check)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"  # stored; a worker has yet to make its Job
        STARTING = "starting", "Starting"  # its Job exists; the server is not answering yet
        RUNNING = "running", "Running"  # the server answers through the portal
        STOPPED = "stopped", "Stopped"  # no Job; the home volume stays; may be resumed
        FAILED = "failed", "Failed"  # the run ended on its own; may be resumed

    class StopReason(models.TextChoices):
        OWNER = "owner", "Stopped by its owner"
        IDLE = "idle", "Stopped as idle"
        LIFETIME = "lifetime", "Reached its maximum lifetime"
        ADMIN = "admin", "Stopped by a lead or admin"

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="sessions")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="sessions")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="sessions"
    )
    name = models.CharField(max_length=63)

    # What it runs with.
    image = models.CharField(max_length=500)
    gpus = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(MAX_GPUS_PER_POD)])
    gpu_resource = models.CharField(
        max_length=253, default=DEFAULT_GPU_RESOURCE, validators=[extended_resource_name_validator]
    )
    gpu_model = models.CharField(max_length=200, blank=True)
    cpu_cores = models.DecimalField(max_digits=7, decimal_places=2)
    memory_gib = models.DecimalField(max_digits=8, decimal_places=2)
    max_lifetime_seconds = models.PositiveIntegerField(
        validators=[MinValueValidator(60), MaxValueValidator(MAX_LIFETIME_SECONDS)],
        help_text="How long one run may last before the cluster ends it.",
    )
    token = models.CharField(
        max_length=64, default=new_token, editable=False, help_text="What the server asks for."
    )

    # What became of its current run.
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    run = models.PositiveIntegerField(default=1, help_text="Its current run: 1, then 2 on resume.")
    queue_name = models.CharField(max_length=63, blank=True)
    node = models.CharField(max_length=253, blank=True)
    server_address = models.CharField(
        max_length=300, blank=True, help_text="host:port of its server while it runs."
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When this run began.")
    stopped_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=10, choices=StopReason.choices, blank=True)
    stopped_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="sessions_stopped",
    )

    # Culling: what the server and DCGM last said, and the warning before a stop.
    last_activity_at = models.DateTimeField(
        null=True, blank=True, help_text="The server's last activity (kernels, terminals, pages)."
    )
    idle_since = models.DateTimeField(
        null=True, blank=True, help_text="Since when both the server and its GPUs are idle."
    )
    idle_checked_at = models.DateTimeField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "cluster", "state"], name="session_team_usage_idx"),
            models.Index(fields=["state"], name="session_state_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["queued", "starting", "running", "stopped", "failed"]),
                name="session_state_valid",
            ),
            models.CheckConstraint(condition=Q(cpu_cores__gt=0), name="session_cpu_positive"),
            models.CheckConstraint(condition=Q(memory_gib__gt=0), name="session_memory_positive"),
            models.CheckConstraint(
                condition=Q(max_lifetime_seconds__gte=60), name="session_lifetime_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"session #{self.pk} {self.name} ({self.state})"

    @property
    def is_active(self) -> bool:
        """Holding (or about to hold) resources on the cluster."""
        return self.state in ACTIVE_STATES

    @property
    def ends_at(self) -> datetime.datetime | None:
        """When the current run reaches its maximum lifetime (None unless it has started)."""
        if self.started_at is None or not self.is_active:
            return None
        return self.started_at + datetime.timedelta(seconds=self.max_lifetime_seconds)

    @property
    def path(self) -> str:
        """Where the portal serves its notebook server."""
        return f"/sessions/{self.pk}/"


ACTIVE_STATES = (
    InteractiveSession.State.QUEUED,
    InteractiveSession.State.STARTING,
    InteractiveSession.State.RUNNING,
)


class HomeVolume(models.Model):
    """A member's home volume in a team on a cluster: one PersistentVolumeClaim that every
    session of theirs there mounts, kept when a session stops. Its size counts against the
    team's storage quota."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="home_volumes")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="home_volumes")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="home_volumes"
    )
    size_gib = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_HOME_GIB)]
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "cluster", "owner"], name="home_volume_one_per_member"
            ),
            models.CheckConstraint(condition=Q(size_gib__gte=1), name="home_volume_size_positive"),
        ]

    def __str__(self) -> str:
        return f"home of {self.owner_id} in {self.team_id} on {self.cluster_id}"

    @property
    def claim_name(self) -> str:
        return home_claim_name(self.owner_id)


def home_claim_name(user_id: int) -> str:
    """The member's home claim in the team's namespace: from the user's id, never their name
    (names change; ids do not)."""
    return f"home-{user_id}"


class SessionPolicy(models.Model):
    """A team's rules for its sessions, set by its leads: the longest a run may last, and when
    an idle session is warned and stopped. Without a row the portal's defaults apply
    (``policy_for``)."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="session_policy")
    max_lifetime_hours = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_LIFETIME_SECONDS // 3600)],
        help_text="The longest one run of a session may last.",
    )
    idle_minutes = models.PositiveIntegerField(
        validators=[MinValueValidator(2), MaxValueValidator(7 * 24 * 60)],
        help_text="Stop a session whose server and GPUs have been idle this long.",
    )
    warn_minutes = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
        help_text="Warn its owner this long before stopping it.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        verbose_name_plural = "session policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(idle_minutes__gt=models.F("warn_minutes")),
                name="session_policy_warning_before_stop",
            ),
        ]

    def __str__(self) -> str:
        return f"session policy of {self.team_id}"


def policy_for(team: Team) -> SessionPolicy:
    """The team's session policy, or the portal's defaults (unsaved) when it set none. Read
    with the team when selected with it (``select_related("team__session_policy")``)."""
    try:
        return team.session_policy
    except SessionPolicy.DoesNotExist:
        pass
    return SessionPolicy(
        team=team,
        max_lifetime_hours=settings.SESSIONS_MAX_LIFETIME_HOURS,
        idle_minutes=settings.SESSIONS_DEFAULT_IDLE_MINUTES,
        warn_minutes=settings.SESSIONS_DEFAULT_WARN_MINUTES,
    )
