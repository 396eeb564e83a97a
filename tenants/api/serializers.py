"""Shapes of the API's JSON. Input serializers check types only; the rules live in services.

Output serializers read only what the view's queryset has already joined (select_related), so
a page of any size costs the same number of queries.
"""

from decimal import Decimal
from functools import cached_property

from django.contrib.auth.models import User
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.fields import StringField
from core.validators import (
    MAX_NAME_LENGTH,
    MAX_NOTE_LENGTH,
    MAX_TEXT_LENGTH,
    one_line_validator,
)
from tenants.ceilings import delegation, department_quota
from tenants.cluster_settings import MAX_ALLOWED_REGISTRIES, MAX_REGISTRY_ENTRY_LENGTH
from tenants.impact import RULE
from tenants.models import (
    AuditEvent,
    Department,
    DepartmentCeiling,
    Membership,
    QuotaGrant,
    QuotaRequest,
    Team,
    TeamCluster,
    TeamQueuePolicy,
)
from tenants.permissions import is_portal_admin
from tenants.selectors import (
    GrantedInPeriod,
    department_ceilings,
    granted_in_request_periods,
    teams_visible_to,
)


def cluster_named(name: str) -> Cluster:
    """The cluster of that name, or the field's error saying there is none."""
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise serializers.ValidationError(f"No cluster named {name!r}.")
    return cluster


# --- teams and members -------------------------------------------------------------------------


class TeamSerializer(serializers.ModelSerializer):
    my_role = serializers.SerializerMethodField(
        help_text="Your role in the team (lead, member or viewer); null if you are not a member."
    )

    class Meta:
        model = Team
        fields = [
            "id",
            "slug",
            "name",
            "description",
            "archived_at",
            "created_at",
            "external_services_allowed",
            "my_role",
        ]
        read_only_fields = fields

    # A plain string in the schema: the same choices as a membership's role, but a second
    # name for one enum makes drf-spectacular warn.
    @extend_schema_field(serializers.CharField(allow_null=True, read_only=True))
    def get_my_role(self, team: Team) -> str | None:
        # Roles come from the view, computed once per request: no query per row.
        return self.context.get("roles", {}).get(team.pk)


class TeamCreateSerializer(serializers.Serializer):
    # The slug's rules (DNS-1123 label, length, uniqueness) are checked by the model in
    # services.team_create, so the API and the forms give the same messages.
    slug = StringField(trim_whitespace=False)
    name = StringField(max_length=MAX_NAME_LENGTH, validators=[one_line_validator])
    description = StringField(
        required=False, allow_blank=True, default="", max_length=MAX_TEXT_LENGTH
    )


class UserSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["id", "username"]
        read_only_fields = fields


class MembershipSerializer(serializers.ModelSerializer):
    user = UserSummarySerializer(read_only=True)
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Membership
        fields = ["user", "team", "role", "created_at"]
        read_only_fields = fields


class MembershipSetSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=Membership.Role.choices)

    def validate_username(self, value: str) -> User:
        user = User.objects.filter(username=value).first()
        if user is None:
            raise serializers.ValidationError(f"No user named {value!r}.")
        return user


class MembershipRoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class TeamBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["id", "slug", "name"]
        read_only_fields = fields


class MyMembershipSerializer(serializers.ModelSerializer):
    team = TeamBriefSerializer(read_only=True)

    class Meta:
        model = Membership
        fields = ["team", "role"]
        read_only_fields = fields


class MeSerializer(serializers.ModelSerializer):
    is_admin = serializers.SerializerMethodField()
    memberships = MyMembershipSerializer(many=True, read_only=True)

    class Meta:
        model = User
        fields = ["id", "username", "email", "first_name", "last_name", "is_admin", "memberships"]
        read_only_fields = fields

    def get_is_admin(self, user: User) -> bool:
        return is_portal_admin(user)


class TeamArchiveSerializer(serializers.Serializer):
    note = StringField(required=False, allow_blank=True, default="", max_length=MAX_NOTE_LENGTH)


class TeamClusterSerializer(serializers.ModelSerializer):
    """Where the team's namespace on one cluster stands: is the cluster in line with the
    portal, when was it last, and if not, why (in words a lead can act on)."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    namespace = serializers.CharField(source="team.namespace", read_only=True)
    in_sync = serializers.BooleanField(read_only=True)
    recovered = serializers.BooleanField(
        read_only=True, help_text="In sync again after the error in last_error."
    )

    class Meta:
        model = TeamCluster
        fields = [
            "cluster",
            "namespace",
            "status",
            "in_sync",
            "recovered",
            "reconcile_requested_at",
            "last_applied_at",
            "last_reconciled_at",
            "applied_quota",
            "last_error",
            "last_error_at",
            "consecutive_failures",
            "namespace_delete_requested_at",
            "namespace_deleted_at",
            "namespace_owned",
        ]
        read_only_fields = fields


class NamespaceDeleteSerializer(serializers.Serializer):
    confirm = serializers.CharField(
        allow_blank=True, help_text="The team's slug, typed out: deleting is irreversible."
    )


# --- clusters ----------------------------------------------------------------------------------


class GpuKindCapacitySerializer(serializers.Serializer):
    resource_name = serializers.CharField(help_text=f"e.g. {DEFAULT_GPU_RESOURCE}")
    gpu_model = serializers.CharField()
    capacity = serializers.IntegerField(help_text="GPUs the portal may plan with.")
    plannable = serializers.IntegerField(help_text="Capacity times the overcommit ratio.")
    granted = serializers.IntegerField(help_text="GPUs active grants hold from today on.")
    free = serializers.IntegerField(help_text="Plannable minus granted.")


class GpuModelCapacitySerializer(serializers.Serializer):
    resource_name = serializers.CharField(help_text=f"e.g. {DEFAULT_GPU_RESOURCE}")
    gpu_model = serializers.CharField(help_text="As the cluster's GPU model node label names it.")
    capacity = serializers.IntegerField(help_text="GPUs of this model the portal may plan with.")
    plannable = serializers.IntegerField(help_text="Capacity times the overcommit ratio.")
    granted = serializers.IntegerField(help_text="GPUs active grants of this model hold.")
    free = serializers.IntegerField(help_text="Plannable minus granted.")
    nodes = serializers.IntegerField(help_text="Usable (Ready, schedulable) nodes of the model.")
    max_per_node = serializers.IntegerField(
        help_text="The most GPUs one node of the model offers: no job larger fits."
    )


def model_rows(summaries) -> list[dict]:
    return [
        {
            "resource_name": m.gpu_resource,
            "gpu_model": m.gpu_model,
            "capacity": m.capacity,
            "plannable": m.plannable,
            "granted": m.granted,
            "free": m.free,
            "nodes": m.nodes,
            "max_per_node": m.max_per_node,
        }
        for m in summaries
    ]


class ClusterSerializer(serializers.ModelSerializer):
    gpus = serializers.SerializerMethodField(help_text="Capacity per GPU kind.")
    gpu_models = serializers.SerializerMethodField(
        help_text="Capacity per GPU model of each kind (grants of a model count against both)."
    )
    allowed_registries = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Registries every container in the cluster's team namespaces may pull from: a "
        "host, or a path under one. Empty allows none unless allow_all_registries.",
    )

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "display_name",
            "overcommit_ratio",
            "quota_mode",
            "allowed_registries",
            "allow_all_registries",
            "gpus",
            "gpu_models",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(GpuModelCapacitySerializer(many=True))
    def get_gpu_models(self, cluster: Cluster) -> list[dict]:
        by_kind = self.context["model_capacity"]
        return model_rows(
            m
            for (cluster_id, _), models in by_kind.items()
            if cluster_id == cluster.pk
            for m in models
        )

    @extend_schema_field(GpuKindCapacitySerializer(many=True))
    def get_gpus(self, cluster: Cluster) -> list[dict]:
        # The view passes capacity_summaries() in the context and prefetches gpu_capacities.
        summaries = self.context["capacity"]
        rows = []
        for gpu in cluster.gpu_capacities.all():
            summary = summaries.get((cluster.pk, gpu.resource_name))
            plannable = summary.plannable if summary else 0
            granted = summary.granted if summary else 0
            rows.append(
                {
                    "resource_name": gpu.resource_name,
                    "gpu_model": gpu.gpu_model,
                    "capacity": gpu.capacity,
                    "plannable": plannable,
                    "granted": granted,
                    "free": plannable - granted,
                }
            )
        return rows


class TrueOrFalseField(serializers.BooleanField):
    """A JSON true or false (or the text "true" or "false", as a form sends it). DRF's
    ``BooleanField`` also reads 1, 0, "yes", "on", "t"...: a setting that opens a cluster to
    every registry is switched on by true only. Left out of a form's body, it is left out (DRF
    reads a missing checkbox as false)."""

    default_empty_html = empty
    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data in ("true", "false"):
            return data == "true"
        self.fail("invalid")


class ClusterSettingsSerializer(serializers.Serializer):
    overcommit_ratio = serializers.DecimalField(
        max_digits=5,
        decimal_places=2,
        required=False,
        help_text="Guaranteed GPUs granted may reach capacity times this ratio.",
    )
    quota_mode = serializers.ChoiceField(
        choices=QuotaMode.choices,
        required=False,
        help_text="quota: a ResourceQuota per team. kueue: Kueue's queues per team (jobs wait "
        "instead of being refused, idle GPUs are borrowed), the ResourceQuota as ceiling. "
        "Switching moves every team on the cluster.",
    )

    allowed_registries = serializers.ListField(
        child=StringField(max_length=MAX_REGISTRY_ENTRY_LENGTH),
        max_length=MAX_ALLOWED_REGISTRIES,
        required=False,
        help_text="Registries every container in the cluster's team namespaces may pull from: "
        'a host, or a path under one (["nvcr.io", "registry.example.com/vision", '
        '"docker.io/library"]); the first component must be a host (with a "." or a port, or '
        f"localhost). Empty allows none unless allow_all_registries. At most "
        f"{MAX_ALLOWED_REGISTRIES}. Reaches the cluster's admission policies at once.",
    )
    allow_all_registries = TrueOrFalseField(
        required=False, help_text="Allow images from any registry, whatever the list says."
    )

    def validate(self, data: dict) -> dict:
        if not data:
            raise serializers.ValidationError(
                "Give one or more of overcommit_ratio, quota_mode, allowed_registries, "
                "allow_all_registries."
            )
        return data


class TeamQueuePolicySerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    # Null once the admin who set it is deleted.
    updated_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = TeamQueuePolicy
        fields = [
            "team",
            "cluster",
            "borrowing_limit",
            "lending_limit",
            "fair_sharing_weight",
            "updated_by",
            "updated_at",
        ]
        read_only_fields = fields


class TeamQueuePolicySetSerializer(serializers.Serializer):
    """Types only; tenants.queueing.team_queue_policy_set checks the ranges."""

    borrowing_limit = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="GPUs of each model the team may borrow beyond its quota; null: no limit.",
    )
    lending_limit = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="GPUs of its own quota of each model it may lend while idle; null: all.",
    )
    fair_sharing_weight = serializers.DecimalField(
        max_digits=7,
        decimal_places=3,
        required=False,
        default=Decimal(1),
        help_text="Its share of idle GPUs relative to other teams' weights (above 0, at most "
        "1000).",
    )


# --- quota requests and grants -----------------------------------------------------------------

QUOTA_FIELDS = [
    "id",
    "team",
    "cluster",
    "gpu_resource",
    "gpu_model",
    "gpus",
    "cpu_cores",
    "memory_gib",
    "starts_on",
    "ends_on",
    "state",
]


class QuotaRequestSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = QuotaRequest
        fields = [
            *QUOTA_FIELDS,
            "justification",
            "requested_by",
            "created_at",
            "decided_by",
            "decided_at",
            "decision_note",
        ]
        read_only_fields = fields


class QuotaRequestCreateSerializer(serializers.Serializer):
    """Types and shapes only; quota.quota_request_create checks the rest."""

    team = serializers.CharField(help_text="Team slug.")
    cluster = serializers.CharField(help_text="Cluster name.")
    gpu_resource = serializers.CharField(default=DEFAULT_GPU_RESOURCE)
    gpu_model = serializers.CharField(
        default="",
        allow_blank=True,
        max_length=200,
        help_text="A GPU model the cluster's nodes have (GET /api/v1/clusters/ lists them under "
        "gpu_models); empty: any model.",
    )
    gpus = serializers.IntegerField(min_value=1)
    cpu_cores = serializers.DecimalField(
        max_digits=8, decimal_places=2, min_value=0, required=False, allow_null=True
    )
    memory_gib = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    starts_on = serializers.DateField(
        required=False, allow_null=True, help_text="Defaults to today."
    )
    ends_on = serializers.DateField(required=False, allow_null=True, help_text="Null: open-ended.")
    # Blank is a business rule ("say what the GPUs are for"): the service words it.
    justification = StringField(allow_blank=True, trim_whitespace=False, max_length=MAX_TEXT_LENGTH)

    def validate_team(self, slug: str) -> Team:
        # Invisible teams read as unknown: the answer never says whether they exist.
        team = teams_visible_to(self.context["request"].user).filter(slug=slug).first()
        if team is None:
            raise serializers.ValidationError(f"No team with slug {slug!r}.")
        return team

    def validate_cluster(self, name: str) -> Cluster:
        return cluster_named(name)


class QuotaRequestApproveSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(
        min_value=1, required=False, help_text="Approve fewer GPUs than requested."
    )
    ends_on = serializers.DateField(required=False, help_text="Approve a shorter period.")
    note = StringField(required=False, allow_blank=True, default="", max_length=MAX_NOTE_LENGTH)


class DecisionNoteSerializer(serializers.Serializer):
    note = StringField(required=False, allow_blank=True, default="", max_length=MAX_NOTE_LENGTH)


class QuotaGrantSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    granted_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    request = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = QuotaGrant
        fields = [
            *QUOTA_FIELDS,
            "request",
            "granted_by",
            "created_at",
            "updated_at",
            "ended_at",
        ]
        read_only_fields = fields


class QuotaGrantShrinkSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(min_value=1, required=False)
    ends_on = serializers.DateField(required=False)
    note = StringField(required=False, allow_blank=True, default="", max_length=MAX_NOTE_LENGTH)


class GrantImpactQuerySerializer(serializers.Serializer):
    """``?gpus=N&ends_on=YYYY-MM-DD``: the shrink to preview; neither previews revoking."""

    gpus = serializers.IntegerField(
        min_value=0,
        required=False,
        help_text="The grant's GPUs after the change; 0 previews revoking it.",
    )
    ends_on = serializers.DateField(
        required=False, help_text="An earlier last day; one before today previews ending it."
    )

    def validate_gpus(self, gpus: int) -> int:
        grant = self.context["grant"]
        if gpus > grant.gpus:
            raise serializers.ValidationError(
                f"Can only preview shrinking: the grant has {grant.gpus} GPUs."
            )
        return gpus

    def validate_ends_on(self, ends_on):
        grant = self.context["grant"]
        if grant.ends_on is not None and ends_on > grant.ends_on:
            raise serializers.ValidationError(
                f"Can only preview ending sooner: the grant ends {grant.ends_on.isoformat()}."
            )
        return ends_on


class ImpactWorkSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["job", "service"], read_only=True)
    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(read_only=True)
    gpus = serializers.IntegerField(read_only=True)
    gpu_model = serializers.CharField(read_only=True, help_text="Empty: any model.")
    since = serializers.DateTimeField(
        read_only=True, help_text="When it started (a job) or was made (a service)."
    )
    url = serializers.CharField(read_only=True, help_text="Its page in the portal.")


class GrantImpactSerializer(serializers.Serializer):
    grant = serializers.IntegerField(source="grant.pk", read_only=True)
    gpus_after = serializers.IntegerField(
        read_only=True, help_text="The grant's GPUs after the change (0: revoked or ended)."
    )
    quota_mode = serializers.SerializerMethodField()
    gpu_resource = serializers.CharField(source="grant.gpu_resource", read_only=True)
    gpu_model = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="The quota's scope in Kueue mode: the grant's GPU model (empty: any model); "
        "null in quota-only mode, where every model of the kind counts.",
    )
    in_effect = serializers.BooleanField(
        read_only=True, help_text="Whether the grant counts today; if not, nothing changes now."
    )
    quota_now = serializers.IntegerField(read_only=True)
    quota_after = serializers.IntegerField(read_only=True)
    held = serializers.IntegerField(read_only=True, help_text="GPUs its running work holds now.")
    over_by = serializers.IntegerField(read_only=True)
    over_quota = ImpactWorkSerializer(
        many=True, read_only=True, help_text="The running work over quota after it, newest first."
    )
    waiting = ImpactWorkSerializer(
        many=True, read_only=True, help_text="Work that waits for GPUs; it would wait longer."
    )
    rule = serializers.SerializerMethodField()
    consequence = serializers.CharField(read_only=True)

    def get_quota_mode(self, impact) -> str:
        return QuotaMode.KUEUE if impact.kueue else QuotaMode.QUOTA_ONLY

    def get_rule(self, impact) -> str:
        return RULE


# --- review queue ------------------------------------------------------------------------------


class ReviewCapacitySerializer(serializers.Serializer):
    capacity = serializers.IntegerField(help_text="GPUs of this kind the cluster has to plan with.")
    plannable = serializers.IntegerField(help_text="Capacity times the overcommit ratio.")
    granted = serializers.IntegerField(help_text="GPUs active grants hold from today on.")
    free = serializers.IntegerField(help_text="Plannable minus granted, now.")
    granted_in_period = serializers.IntegerField(
        help_text="GPUs active grants hold during this request's period (what approval checks)."
    )
    free_after = serializers.IntegerField(
        help_text="Plannable minus granted in the request's period minus this request's GPUs "
        "(negative: approving it in full would be refused)."
    )


DECISION_FIELDS = {"state", "decided_by", "decided_at", "decision_note"}


class DelegationSerializer(serializers.Serializer):
    allowed = serializers.BooleanField(help_text="Whether you may approve or reject it.")
    reason = serializers.CharField(
        help_text="Why (not): the ceilings' arithmetic, or that it needs a portal admin."
    )


class ReviewQueueItemSerializer(QuotaRequestSerializer):
    """A pending request beside its cluster's figures for the requested GPU kind, for the
    requested model (when it names one) and for every model of the kind."""

    capacity = serializers.SerializerMethodField()
    model_capacity = serializers.SerializerMethodField(
        help_text="The requested model's figures; null for a request of any model."
    )
    gpu_models = serializers.SerializerMethodField(
        help_text="Capacity, granted and free per GPU model of the requested kind."
    )

    delegation = serializers.SerializerMethodField(
        help_text="For a department admin: whether they may decide it, and why (not), with the "
        "ceiling's arithmetic. Null for portal admins."
    )

    class Meta(QuotaRequestSerializer.Meta):
        # Every item is pending: no state and no decision yet.
        fields = [
            *(f for f in QuotaRequestSerializer.Meta.fields if f not in DECISION_FIELDS),
            "capacity",
            "model_capacity",
            "gpu_models",
            "delegation",
        ]
        read_only_fields = fields

    def prepare_rows(self, objects) -> None:
        """What grants hold during each request's period, and for a department admin each
        request's verdict (``core.rows``: read once per page, from the requests themselves)."""
        self._in_period = granted_in_request_periods(objects)
        self._delegations = {}
        user = self.context["request"].user
        if is_portal_admin(user):
            return
        requests = QuotaRequest.objects.filter(pk__in=[o.pk for o in objects]).select_related(
            "team", "cluster"
        )
        for quota_request in requests:
            verdict = delegation(reviewer=user, quota_request=quota_request)
            self._delegations[quota_request.pk] = {
                "allowed": verdict.allowed,
                "reason": verdict.reason,
            }

    def _granted_in_period(self, quota_request) -> GrantedInPeriod:
        """The page's figures; read here for a request serialized outside a page."""
        in_period = getattr(self, "_in_period", None)
        if in_period is None or quota_request.pk not in in_period:
            return granted_in_request_periods([quota_request])[quota_request.pk]
        return in_period[quota_request.pk]

    @extend_schema_field(DelegationSerializer(allow_null=True))
    def get_delegation(self, quota_request) -> dict | None:
        delegations = getattr(self, "_delegations", None)
        return delegations.get(quota_request.pk) if delegations else None

    # Read once per page rather than per row: the context's figures, and each GPU kind's model
    # rows (the same for every request of the kind).
    @cached_property
    def _capacity(self) -> dict:
        return self.context["capacity"]

    @cached_property
    def _model_capacity(self) -> dict:
        return self.context["model_capacity"]

    @cached_property
    def _model_rows(self) -> dict[tuple[int, str], list[dict]]:
        return {key: model_rows(summaries) for key, summaries in self._model_capacity.items()}

    @extend_schema_field(GpuModelCapacitySerializer(many=True))
    def get_gpu_models(self, quota_request: QuotaRequest) -> list[dict]:
        rows = self._model_rows.get((quota_request.cluster_id, quota_request.gpu_resource))
        return list(rows) if rows else []

    @extend_schema_field(ReviewCapacitySerializer(allow_null=True))
    def get_model_capacity(self, quota_request: QuotaRequest) -> dict[str, int] | None:
        gpu_model = quota_request.gpu_model
        if not gpu_model:
            return None
        models = self._model_capacity.get((quota_request.cluster_id, quota_request.gpu_resource))
        summary = next((m for m in models or () if m.gpu_model == gpu_model), None)
        return _figures(
            summary,
            gpus=quota_request.gpus,
            granted_in_period=self._granted_in_period(quota_request).model,
        )

    @extend_schema_field(ReviewCapacitySerializer)
    def get_capacity(self, quota_request: QuotaRequest) -> dict[str, int]:
        summary = self._capacity.get((quota_request.cluster_id, quota_request.gpu_resource))
        return _figures(
            summary,
            gpus=quota_request.gpus,
            # No figures for the kind: nothing counted in the period either.
            granted_in_period=self._granted_in_period(quota_request).kind if summary else 0,
        )


def _figures(summary, *, gpus: int, granted_in_period: int) -> dict[str, int]:
    """A request's figures for its GPU kind or model; zeros for one the cluster lacks."""
    if summary is None:
        return {
            "capacity": 0,
            "plannable": 0,
            "granted": 0,
            "free": 0,
            "granted_in_period": granted_in_period,
            "free_after": -granted_in_period - gpus,
        }
    return {
        "capacity": summary.capacity,
        "plannable": summary.plannable,
        "granted": summary.granted,
        "free": summary.free,
        "granted_in_period": granted_in_period,
        "free_after": summary.free_after(gpus=gpus, granted_in_period=granted_in_period),
    }


# --- audit -------------------------------------------------------------------------------------


class AuditEventSerializer(serializers.ModelSerializer):
    # Null: done by the portal itself (a task, a command), or by a user since deleted.
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    # Null: about no team (a cluster's or a department's settings), or a team since deleted.
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "actor",
            "team",
            "action",
            "target_type",
            "target_id",
            "before",
            "after",
            "note",
        ]
        read_only_fields = fields


# --- departments -------------------------------------------------------------------------------


class DepartmentCeilingSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = DepartmentCeiling
        fields = ["cluster", "gpu_resource", "gpu_model", "gpus", "updated_at"]
        read_only_fields = fields


class DepartmentQuotaSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    gpu_resource = serializers.CharField()
    gpu_model = serializers.CharField()
    granted = serializers.IntegerField(
        help_text="GPUs the department's teams (nested departments' included) hold today."
    )
    ceiling = serializers.IntegerField(allow_null=True, help_text="Null: no ceiling.")
    free = serializers.IntegerField(
        allow_null=True, help_text="Ceiling minus granted (negative: above it)."
    )


class DepartmentSerializer(serializers.ModelSerializer):
    parent = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    admins = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    teams = serializers.SlugRelatedField(
        slug_field="slug", many=True, read_only=True, help_text="Its own teams (not nested)."
    )

    class Meta:
        model = Department
        fields = ["id", "slug", "name", "parent", "admins", "teams", "created_at"]
        read_only_fields = fields


class DepartmentDetailSerializer(DepartmentSerializer):
    """One department with its ceilings and what its teams hold against them today."""

    ceilings = serializers.SerializerMethodField()
    quota = serializers.SerializerMethodField()
    usage_url = serializers.SerializerMethodField(
        help_text="Its GPU usage report: GET /api/v1/usage-report/?department=<slug>."
    )

    class Meta(DepartmentSerializer.Meta):
        fields = [*DepartmentSerializer.Meta.fields, "ceilings", "quota", "usage_url"]
        read_only_fields = fields

    @extend_schema_field(DepartmentCeilingSerializer(many=True))
    def get_ceilings(self, department: Department) -> list[dict]:
        return DepartmentCeilingSerializer(department_ceilings(department), many=True).data

    @extend_schema_field(DepartmentQuotaSerializer(many=True))
    def get_quota(self, department: Department) -> list[dict]:
        return [
            {
                "cluster": row.cluster,
                "gpu_resource": row.gpu_resource,
                "gpu_model": row.gpu_model,
                "granted": row.granted,
                "ceiling": row.ceiling,
                "free": row.free,
            }
            for row in department_quota(department)
        ]

    def get_usage_url(self, department: Department) -> str:
        return f"{reverse('api-usage-report')}?department={department.slug}"


class DepartmentWriteSerializer(serializers.Serializer):
    """Types only; tenants.departments checks the slug, the name and the cycle."""

    slug = StringField(trim_whitespace=False, required=False)
    name = StringField(max_length=MAX_NAME_LENGTH, validators=[one_line_validator], required=False)
    parent = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="Parent's slug; null: none."
    )

    def validate_parent(self, slug: str | None) -> Department | None:
        if not slug:
            return None
        parent = Department.objects.filter(slug=slug).first()
        if parent is None:
            raise serializers.ValidationError(f"No department with slug {slug!r}.")
        return parent


class DepartmentCreateSerializer(DepartmentWriteSerializer):
    slug = StringField(trim_whitespace=False)
    name = StringField(max_length=MAX_NAME_LENGTH, validators=[one_line_validator])


class DepartmentAdminsSerializer(serializers.Serializer):
    admins = serializers.ListField(child=serializers.CharField(), help_text="Usernames.")

    def validate_admins(self, usernames: list[str]) -> list[User]:
        users = {u.username: u for u in User.objects.filter(username__in=usernames)}
        unknown = [name for name in usernames if name not in users]
        if unknown:
            raise serializers.ValidationError(f"No user named {', '.join(map(repr, unknown))}.")
        return list(users.values())


class DepartmentCeilingSetSerializer(serializers.Serializer):
    """Types only; tenants.departments checks the model and the range."""

    cluster = serializers.CharField(help_text="Cluster name.")
    gpu_resource = serializers.CharField(default=DEFAULT_GPU_RESOURCE)
    gpu_model = serializers.CharField(max_length=200)
    gpus = serializers.IntegerField(
        allow_null=True, help_text="The most GPUs of the model its teams may hold; null: remove."
    )

    def validate_cluster(self, name: str) -> Cluster:
        return cluster_named(name)


class TeamDepartmentSerializer(serializers.Serializer):
    department = serializers.CharField(
        allow_null=True, allow_blank=True, help_text="Department slug; null: none."
    )

    def validate_department(self, slug: str | None) -> Department | None:
        if not slug:
            return None
        department = Department.objects.filter(slug=slug).first()
        if department is None:
            raise serializers.ValidationError(f"No department with slug {slug!r}.")
        return department
