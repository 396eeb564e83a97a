from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.validators import extended_resource_name_validator
from serving.specs import MAX_PORT, MAX_REPLICAS, MAX_SERVICE_NAME_LENGTH, ProbeKind
from tenants.models import ReconcileState, Team
from workloads.specs import MAX_GPUS_PER_POD


class InferenceService(ReconcileState):
    """One long-running model server a team runs on a cluster: its revisions (a Deployment each
    while live), how traffic is split between them and how far a rollout has got, and how far
    the cluster is in line with it (the reconcile's outcome, as for a team's namespace)."""

    class State(models.TextChoices):
        ACTIVE = "active", "Active"  # its live revisions run, or are starting
        STOPPED = "stopped", "Stopped"  # scaled to zero: no replica holds GPUs
        DELETING = "deleting", "Deleting"  # its objects are being removed from the cluster
        DELETED = "deleted", "Deleted"  # nothing of it is left on the cluster

    class Rollout(models.TextChoices):
        NONE = "none", "Stable"  # one revision takes all the traffic
        ROLLING = "rolling", "Rolling out"  # a new revision starts, takes over once ready
        CANARY = "canary", "Canary"  # a new revision takes a share until promoted or rolled back
        AB_TEST = "ab_test", "A/B test"  # two named variants share the traffic

    class Routing(models.TextChoices):
        GATEWAY_API = "gateway-api", "HTTPRoute backend weights"
        REPLICAS = "replicas", "Replica counts behind one Service"

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="inference_services")
    cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, related_name="inference_services"
    )
    name = models.CharField(
        max_length=MAX_SERVICE_NAME_LENGTH,
        help_text="Its Kubernetes Service's name in the team's namespace.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="inference_services"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    rollout = models.CharField(max_length=10, choices=Rollout.choices, default=Rollout.NONE)
    routing = models.CharField(
        max_length=12,
        choices=Routing.choices,
        blank=True,
        help_text="How the last pass split the traffic (from the cluster's Gateway API).",
    )
    stopped_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "cluster", "name"],
                condition=~Q(state="deleted"),
                name="inference_service_name_unique",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["active", "stopped", "deleting", "deleted"]),
                name="inference_service_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(rollout__in=["none", "rolling", "canary", "ab_test"]),
                name="inference_service_rollout_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "in_sync", "error"]),
                name="inference_service_status_valid",
            ),
        ]
        indexes = [models.Index(fields=["team", "cluster", "state"], name="isvc_team_state_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.team.slug} on {self.cluster.name})"

    @property
    def namespace(self) -> str:
        return self.team.slug

    @property
    def is_live(self) -> bool:
        """Its revisions are (or may be) on the cluster and it takes actions."""
        return self.state in (self.State.ACTIVE, self.State.STOPPED)


class Revision(models.Model):
    """One version of a service's spec, never changed once made: changing the image or any
    setting makes a new revision. Besides the spec, a row holds what the portal does with it
    (its role, replicas and traffic weight; scaling changes the replicas, as scaling a
    Deployment keeps its ReplicaSet) and what the cluster shows of it (written by the watcher).
    """

    class Role(models.TextChoices):
        STABLE = "stable", "Stable"  # serves the traffic the candidate leaves
        CANDIDATE = "candidate", "Candidate"  # rolling out, a canary, or A/B's second variant
        RETIRED = "retired", "Retired"  # no longer deployed

    class Probe(models.TextChoices):
        HTTP = ProbeKind.HTTP, "HTTP GET"
        TCP = ProbeKind.TCP, "TCP connect"

    service = models.ForeignKey(
        InferenceService, on_delete=models.CASCADE, related_name="revisions"
    )
    number = models.PositiveIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="service_revisions"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    # The spec (``serving.specs.RevisionRequest``).
    image = models.CharField(max_length=500)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=list, blank=True, help_text='[{"name": ..., "value": ...}]')
    cpu_cores = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True)
    memory_gib = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    gpus = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_GPUS_PER_POD)],
        help_text="GPUs of each replica.",
    )
    gpu_resource = models.CharField(
        max_length=253, default=DEFAULT_GPU_RESOURCE, validators=[extended_resource_name_validator]
    )
    gpu_model = models.CharField(max_length=200, blank=True)
    port = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_PORT)]
    )
    probe = models.CharField(max_length=4, choices=Probe.choices, default=Probe.HTTP)
    probe_path = models.CharField(max_length=1024, blank=True, default="/")
    sidecar = models.JSONField(
        null=True,
        blank=True,
        help_text="Optional CPU-only container: image, command, args, env, cpu_cores, memory_gib.",
    )
    annotations = models.JSONField(default=dict, blank=True, help_text="Extra pod annotations.")

    # What the portal does with it.
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.STABLE)
    replicas = models.PositiveIntegerField(
        default=1,
        validators=[MaxValueValidator(MAX_REPLICAS)],
        help_text="Replicas it runs while its service is active (the action that scales it).",
    )
    weight = models.PositiveSmallIntegerField(
        default=100, validators=[MaxValueValidator(100)], help_text="Its share of the traffic, %."
    )
    variant = models.CharField(max_length=32, blank=True, help_text="Its name in an A/B test.")
    retired_at = models.DateTimeField(null=True, blank=True)

    # What the cluster shows of it (the watcher's).
    desired_replicas = models.PositiveIntegerField(
        default=0, help_text="Replicas its Deployment asks for, as last seen."
    )
    current_replicas = models.PositiveIntegerField(default=0)
    ready_replicas = models.PositiveIntegerField(default=0)
    updated_replicas = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True, help_text="How its replicas are doing, in words.")
    pods = models.JSONField(default=list, blank=True)
    nodes = models.JSONField(default=list, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["service", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["service", "number"], name="revision_number_unique"),
            models.UniqueConstraint(
                fields=["service"], condition=Q(role="stable"), name="revision_one_stable"
            ),
            models.UniqueConstraint(
                fields=["service"], condition=Q(role="candidate"), name="revision_one_candidate"
            ),
            models.CheckConstraint(
                condition=Q(role__in=["stable", "candidate", "retired"]),
                name="revision_role_valid",
            ),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="revision_gpus_positive"),
            models.CheckConstraint(
                condition=Q(port__gte=1) & Q(port__lte=MAX_PORT), name="revision_port_in_range"
            ),
            models.CheckConstraint(condition=Q(weight__lte=100), name="revision_weight_percent"),
            models.CheckConstraint(
                condition=Q(probe__in=["http", "tcp"]), name="revision_probe_valid"
            ),
            models.CheckConstraint(
                condition=Q(cpu_cores__isnull=True) | Q(cpu_cores__gt=0),
                name="revision_cpu_positive",
            ),
            models.CheckConstraint(
                condition=Q(memory_gib__isnull=True) | Q(memory_gib__gt=0),
                name="revision_memory_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.service.name} r{self.number} ({self.role})"

    @property
    def is_live(self) -> bool:
        return self.role != self.Role.RETIRED

    @property
    def label(self) -> str:
        """How pages name it: ``r3``, or ``r3 (control)`` in an A/B test."""
        return f"r{self.number}" + (f" ({self.variant})" if self.variant else "")
