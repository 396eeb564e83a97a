"""Quota requests: asking for GPUs, and approving, rejecting or withdrawing a request."""

from rest_framework import serializers

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.fields import StringField
from core.validators import MAX_NOTE_LENGTH, MAX_TEXT_LENGTH
from tenants.api.serializers.clusters import cluster_named
from tenants.models import QUOTA_AMOUNT_FIELDS, QuotaRequest, Team
from tenants.selectors import teams_visible_to

# The fields a request and a grant have alike.
QUOTA_FIELDS = ["id", "team", "cluster", *QUOTA_AMOUNT_FIELDS, "state"]


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
