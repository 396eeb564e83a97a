from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from clusters.models import Cluster, validate_object_limits
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.validators import (
    DNS1123_LABEL_MAX_LENGTH,
    dns1123_label_validator,
    extended_resource_name_validator,
    validate_namespace_not_reserved,
)

# Upper bounds of what one request may ask for: anything above them is a typo (and would not fit
# the columns, so it must be refused with a message, never reach the database).
MAX_CPU_CORES = 100_000
MAX_MEMORY_GIB = 1_000_000


class Department(models.Model):
    """A group of teams (a business unit) with its own admins, ceilings and budget; departments
    nest through ``parent`` (never in a cycle)."""

    slug = models.SlugField(
        max_length=DNS1123_LABEL_MAX_LENGTH,
        unique=True,
        validators=[dns1123_label_validator],
        help_text="Lower-case letters, digits and '-', as a team's slug (it may name a cohort).",
    )
    name = models.CharField(max_length=200)
    parent = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="children"
    )
    admins = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="administered_departments"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug


class DepartmentCeiling(models.Model):
    """The most GPUs of one model (of one kind) on one cluster that a department's teams, its
    nested departments' included, may hold at once: what its admins may approve up to."""

    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="ceilings")
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="department_ceilings"
    )
    gpu_resource = models.CharField(
        max_length=253, default=DEFAULT_GPU_RESOURCE, validators=[extended_resource_name_validator]
    )
    gpu_model = models.CharField(
        max_length=200, help_text="The GPU model, as the cluster's GPU model label names it."
    )
    gpus = models.PositiveIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["department", "cluster", "gpu_resource", "gpu_model"]
        constraints = [
            models.UniqueConstraint(
                fields=["department", "cluster", "gpu_resource", "gpu_model"],
                name="department_ceiling_unique",
            ),
            models.CheckConstraint(
                condition=Q(gpus__gte=0), name="department_ceiling_gpus_non_negative"
            ),
            models.CheckConstraint(
                condition=~Q(gpu_model=""), name="department_ceiling_names_a_model"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.department}: at most {self.gpus} × {self.gpu_model} on {self.cluster}"


def validate_slug_free_on_clusters(slug: str) -> None:
    """A team's slug becomes its namespace on every cluster: never one a cluster reserves for
    its own components (``Cluster.reserved_namespaces``)."""
    reserving = sorted(
        cluster.name
        for cluster in Cluster.objects.only("name", "reserved_namespaces")
        if slug in (cluster.reserved_namespaces or [])
    )
    if reserving:
        raise ValidationError(
            f"{slug!r} is the namespace of a cluster component on {', '.join(reserving)} "
            "(reserved there by an admin); choose another.",
            code="reserved_namespace",
        )


class Team(models.Model):
    """A group of people who share GPU quota; its slug becomes their namespace on each cluster
    (so it never changes once the team has one: ``services.team_update``)."""

    slug = models.CharField(
        max_length=DNS1123_LABEL_MAX_LENGTH,
        unique=True,
        validators=[dns1123_label_validator, validate_namespace_not_reserved],
        help_text="Becomes the team's Kubernetes namespace name; fixed once it has one.",
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    department = models.ForeignKey(
        Department, on_delete=models.PROTECT, null=True, blank=True, related_name="teams"
    )
    external_services_allowed = models.BooleanField(
        default=False,
        help_text="Let the team's namespaces hold Services reachable from outside the cluster "
        "(NodePort, LoadBalancer, externalIPs). Off: the cluster refuses them.",
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        # Checked when the slug is chosen: a cluster reserving it later does not stop the team
        # being renamed or described (the reconcile then makes nothing there, and says why).
        chosen = self.pk is None or not Team.objects.filter(pk=self.pk, slug=self.slug).exists()
        if self.slug and chosen:
            try:
                validate_slug_free_on_clusters(self.slug)
            except ValidationError as error:
                raise ValidationError({"slug": error.messages}) from error

    @property
    def namespace(self) -> str:
        return self.slug


class Membership(models.Model):
    """One user's role in one team."""

    class Role(models.TextChoices):
        LEAD = "lead", "Lead"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "user"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_team_user_unique"),
            models.CheckConstraint(
                condition=Q(role__in=["lead", "member", "viewer"]), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.team}"


class QuotaAmounts(models.Model):
    """What a request asks for and a grant gives: GPUs of one kind on one cluster for a period."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT)
    gpu_resource = models.CharField(
        max_length=253, default=DEFAULT_GPU_RESOURCE, validators=[extended_resource_name_validator]
    )
    gpu_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The GPU model (the cluster's GPU model label value); empty means any model.",
    )
    gpus = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    cpu_cores = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(MAX_CPU_CORES)],
    )
    memory_gib = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(MAX_MEMORY_GIB)]
    )
    starts_on = models.DateField()
    ends_on = models.DateField(null=True, blank=True, help_text="Empty means open-ended.")

    class Meta:
        abstract = True


# What a request asks for and a grant gives beside the team and the cluster (gpu_resource,
# gpu_model, gpus, cpu_cores, memory_gib, starts_on, ends_on): what the audit trail records of
# both and the API shows.
QUOTA_AMOUNT_FIELDS = [f.name for f in QuotaAmounts._meta.local_fields if not f.is_relation]


class QuotaRequest(QuotaAmounts):
    """A team lead's ask for GPU quota, waiting for (or having had) an admin's decision."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        CANCELLED = "cancelled", "Cancelled"

    justification = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="quota_decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "created_at"], name="quota_request_queue_idx")]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=1), name="quota_request_gpus_positive"),
            models.CheckConstraint(
                condition=Q(ends_on__isnull=True) | Q(ends_on__gte=F("starts_on")),
                name="quota_request_ends_after_start",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["pending", "approved", "rejected", "cancelled"]),
                name="quota_request_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team}: {self.gpus} × {self.gpu_resource} on {self.cluster}"


class QuotaGrant(QuotaAmounts):
    """Quota an admin approved: while active it counts against the cluster's capacity and is
    what the team's ResourceQuota on that cluster is made of."""

    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        EXPIRED = "expired", "Expired"
        REVOKED = "revoked", "Revoked"

    request = models.OneToOneField(QuotaRequest, on_delete=models.PROTECT, related_name="grant")
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_grants_given"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["cluster", "gpu_resource", "state"], name="quota_grant_usage_idx"),
            # What capacity checks and the review queue sum: the active grants of a GPU kind on
            # a cluster in a period, found without reading the cluster's ended grants.
            models.Index(
                fields=["cluster", "gpu_resource", "starts_on"],
                condition=Q(state="active"),
                name="quota_grant_active_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=1), name="quota_grant_gpus_positive"),
            models.CheckConstraint(
                condition=Q(ends_on__isnull=True) | Q(ends_on__gte=F("starts_on")),
                name="quota_grant_ends_after_start",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["active", "expired", "revoked"]),
                name="quota_grant_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"grant #{self.pk} {self.team}: {self.gpus} × {self.gpu_resource} on {self.cluster}"

    @property
    def starts_later(self) -> bool:
        """Active but booked ahead: it counts from ``starts_on``, a day still to come."""
        return self.state == self.State.ACTIVE and self.starts_on > timezone.localdate()


class ReconcileState(models.Model):
    """How far something on a cluster has been brought in line with the portal: when a pass was
    asked for and last ran, whether it is in sync, and the last error in words (written by the
    reconcile passes, read by the pages and the API)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        IN_SYNC = "in_sync", "In sync"
        ERROR = "error", "Error"
        DELETED = "deleted", "Namespace deleted"

    reconcile_requested_at = models.DateTimeField(null=True, blank=True)
    last_reconciled_at = models.DateTimeField(
        null=True, blank=True, help_text="When the last reconcile attempt ended, however it went."
    )
    reconcile_runs = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    last_applied_at = models.DateTimeField(
        null=True, blank=True, help_text="When the cluster was last found or brought in line."
    )
    last_write_count = models.PositiveIntegerField(
        default=0, help_text="Objects the last successful pass applied or deleted (0: unchanged)."
    )
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    queues_applied = models.BooleanField(
        default=False,
        help_text="Kueue objects the portal made may be on the cluster: a pass in Kueue mode "
        "applied them and no pass since has found them pruned.",
    )

    class Meta:
        abstract = True

    @property
    def in_sync(self) -> bool:
        return self.status == self.Status.IN_SYNC

    @property
    def recovered(self) -> bool:
        """In sync again after an error (which stays on record until the next one)."""
        return bool(
            self.in_sync
            and self.last_error_at
            and self.last_applied_at
            and self.last_applied_at > self.last_error_at
        )


class TeamCluster(ReconcileState):
    """A team's presence on one cluster: its namespace there and how far the cluster has been
    brought in line with the portal's grants (written by the reconcile task)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="cluster_states")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="team_states")
    applied_quota = models.JSONField(
        default=dict, blank=True, help_text="The ResourceQuota's hard limits as last applied."
    )
    namespace_delete_requested_at = models.DateTimeField(null=True, blank=True)
    namespace_deleted_at = models.DateTimeField(null=True, blank=True)
    namespace_owned = models.BooleanField(
        null=True,
        blank=True,
        help_text="What the last reconcile found of the team's namespace: the portal's (made or "
        "found with its labels), someone else's (never touched, no metrics shown from it), or "
        "empty: not looked at yet, or deleted since.",
    )

    class Meta:
        ordering = ["team", "cluster"]
        constraints = [
            models.UniqueConstraint(fields=["team", "cluster"], name="team_cluster_unique"),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "in_sync", "error", "deleted"]),
                name="team_cluster_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team} on {self.cluster}"


class ClusterState(ReconcileState):
    """How far a cluster's cluster-wide objects are in line with the portal: the admission
    policies bound to the namespaces it manages, and in Kueue mode the ResourceFlavors of its
    GPU models and the WorkloadPriorityClasses (written by the cluster reconcile task)."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="state")
    admission_applied_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a pass last found or put the portal's admission policies on the "
        "cluster. Until one has, no member is bound in any team namespace there.",
    )

    class Meta:
        ordering = ["cluster"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "in_sync", "error"]),
                name="cluster_state_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"cluster-wide objects on {self.cluster}"


class TeamObjectLimits(models.Model):
    """What a team's ResourceQuota on a cluster caps besides GPUs, CPU and memory, where an
    admin changed the cluster's caps for it (``limits``: only the resources changed)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="object_limits")
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="team_object_limits"
    )
    limits = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_object_limits],
        help_text='e.g. {"count/jobs.batch": "1000", "persistentvolumeclaims": "50"}: these '
        "replace the cluster's caps for this team.",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "team object limits"
        verbose_name_plural = "team object limits"
        constraints = [
            models.UniqueConstraint(fields=["team", "cluster"], name="team_object_limits_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team} on {self.cluster}"


class TeamQueuePolicy(models.Model):
    """How a team shares GPUs with the other teams of a Kueue cluster: how many GPUs of each
    model it may borrow beyond its own quota, how many of its own it lends while idle, and its
    weight when idle GPUs are shared out. Without a row a team borrows and lends without limit
    at weight 1."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="queue_policies")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="queue_policies")
    borrowing_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="GPUs of each model the team may borrow beyond its quota; empty: no limit.",
    )
    lending_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="GPUs of its own quota of each model it may lend while idle; empty: all.",
    )
    fair_sharing_weight = models.DecimalField(
        max_digits=6,
        decimal_places=3,
        default=Decimal("1"),
        validators=[MinValueValidator(Decimal("0.001")), MaxValueValidator(Decimal("1000"))],
        help_text="Its share of idle GPUs relative to other teams' weights.",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team", "cluster"]
        constraints = [
            models.UniqueConstraint(fields=["team", "cluster"], name="team_queue_policy_unique"),
            models.CheckConstraint(
                condition=Q(fair_sharing_weight__gt=0), name="team_queue_policy_weight_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team}'s queue policy on {self.cluster}"


class AuditEvent(models.Model):
    """One state change: who did what to which object, when, and the object before and after."""

    class Action(models.TextChoices):
        """Every change the portal records. Services write these and readers (the idle report's
        shrink history, filters, admin) compare against them, never against string literals."""

        TEAM_CREATED = "team.created", "team created"
        TEAM_UPDATED = "team.updated", "team updated"
        TEAM_ARCHIVED = "team.archived", "team archived"
        TEAM_NAMESPACE_DELETE_REQUESTED = (
            "team.namespace_delete_requested",
            "team namespace deletion requested",
        )
        MEMBERSHIP_SET = "membership.set", "membership set"
        MEMBERSHIP_REMOVED = "membership.removed", "membership removed"
        USER_DEACTIVATED = "user.deactivated", "user deactivated"
        USER_REACTIVATED = "user.reactivated", "user reactivated"
        USER_RENAMED = "user.renamed", "user renamed"
        USER_ADMIN_GRANTED = "user.admin_granted", "user made portal admin"
        USER_ADMIN_REVOKED = "user.admin_revoked", "user no longer portal admin"
        GROUP_SYNC_ENTRY_SKIPPED = "group_sync.entry_skipped", "group sync: mapping entry skipped"
        CLUSTER_SETTINGS_CHANGED = "cluster.settings_changed", "cluster settings changed"
        CLUSTER_OVERCOMMIT_CHANGED = "cluster.overcommit_changed", "cluster overcommit changed"
        CLUSTER_QUOTA_MODE_CHANGED = "cluster.quota_mode_changed", "cluster quota mode changed"
        CLUSTER_BORROWING_CHANGED = (
            "cluster.borrowing_changed",
            "cluster borrowing fairness changed",
        )
        TEAM_QUEUE_POLICY_SET = "team_queue_policy.set", "team queue policy set"
        TEAM_OBJECT_LIMITS_SET = "team_object_limits.set", "team object limits set"
        QUOTA_REQUEST_CREATED = "quota_request.created", "quota request created"
        QUOTA_REQUEST_CANCELLED = "quota_request.cancelled", "quota request cancelled"
        QUOTA_REQUEST_REJECTED = "quota_request.rejected", "quota request rejected"
        QUOTA_REQUEST_APPROVED = "quota_request.approved", "quota request approved"
        QUOTA_GRANT_ACTIVATED = "quota_grant.activated", "quota grant activated"
        QUOTA_GRANT_STARTED = "quota_grant.started", "quota grant started"
        QUOTA_GRANT_SHRUNK = "quota_grant.shrunk", "quota grant shrunk"
        QUOTA_GRANT_REVOKED = "quota_grant.revoked", "quota grant revoked"
        QUOTA_GRANT_EXPIRED = "quota_grant.expired", "quota grant expired"
        QUOTA_GRANT_ENDING_REMINDED = (
            "quota_grant.ending_reminded",
            "quota grant ending: leads reminded",
        )
        GPU_JOB_SUBMITTED = "gpu_job.submitted", "GPU job submitted"
        GPU_JOB_CANCELLED = "gpu_job.cancelled", "GPU job cancelled"
        IDLE_POD_STOPPED = "idle_pod.stopped", "idle pod stopped"
        IDLE_POLICY_SET = "idle_policy.set", "idle policy set"
        SERVICE_DEPLOYED = "inference_service.deployed", "inference service deployed"
        SERVICE_REVISED = "inference_service.revised", "inference service revision made"
        SERVICE_TRAFFIC_SET = "inference_service.traffic_set", "inference service traffic set"
        SERVICE_PROMOTED = "inference_service.promoted", "inference service promoted"
        SERVICE_ROLLED_BACK = "inference_service.rolled_back", "inference service rolled back"
        SERVICE_SCALED = "inference_service.scaled", "inference service scaled"
        SERVICE_STOPPED = "inference_service.stopped", "inference service stopped"
        SERVICE_DELETED = "inference_service.deleted", "inference service deleted"
        SESSION_STARTED = "session.started", "session started"
        SESSION_STOPPED = "session.stopped", "session stopped"
        SESSION_RESUMED = "session.resumed", "session resumed"
        SESSION_POLICY_SET = "session_policy.set", "session policy set"
        PRICE_SET = "price.set", "price set"
        BUDGET_SET = "budget.set", "budget set"
        BUDGET_DELETED = "budget.deleted", "budget deleted"
        DEPARTMENT_CREATED = "department.created", "department created"
        DEPARTMENT_UPDATED = "department.updated", "department updated"
        DEPARTMENT_ADMINS_SET = "department.admins_set", "department admins set"
        DEPARTMENT_CEILING_SET = "department.ceiling_set", "department ceiling set"
        TEAM_DEPARTMENT_SET = "team.department_set", "team department set"
        WEBHOOK_CREATED = "webhook.created", "webhook created"
        WEBHOOK_UPDATED = "webhook.updated", "webhook changed"
        WEBHOOK_DELETED = "webhook.deleted", "webhook deleted"
        LAYOUT_REQUESTED = "sharing_layout.requested", "sharing layout requested"
        LAYOUT_CANCELLED = "sharing_layout.cancelled", "sharing layout cancelled"
        LAYOUT_REJECTED = "sharing_layout.rejected", "sharing layout rejected"
        LAYOUT_APPROVED = "sharing_layout.approved", "sharing layout approved"
        LAYOUT_APPLIED = "sharing_layout.applied", "sharing layout applied"
        LAYOUT_FAILED = "sharing_layout.failed", "sharing layout failed"
        LAYOUT_REVERTED = "sharing_layout.reverted", "sharing layout reverted"
        MEMBER_LIMIT_SET = "member_limit.set", "member limit set"
        MEMBER_LIMIT_REMOVED = "member_limit.removed", "member limit removed"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    team = models.ForeignKey(
        Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_events"
    )
    action = models.CharField(max_length=64, db_index=True, choices=Action.choices)
    target_type = models.CharField(max_length=64)
    target_id = models.PositiveBigIntegerField()
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target_type}#{self.target_id}"
