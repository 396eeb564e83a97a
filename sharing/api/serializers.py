"""Sharing layouts over REST: what a layout is, and asking for, approving or rejecting one."""

from rest_framework import serializers

from core.fields import StringField
from core.validators import MAX_NOTE_LENGTH, MAX_TEXT_LENGTH
from sharing.models import LayoutRequest
from tenants.models import QuotaGrant, Team
from tenants.selectors import quota_grants_visible_to, teams_visible_to


class LayoutSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    slice_resource = serializers.CharField(
        read_only=True, help_text="e.g. nvidia.com/mig-1g.10gb or nvidia.com/gpu.shared"
    )
    nodes = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="The nodes picked, by name."
    )

    class Meta:
        model = LayoutRequest
        fields = [
            "id",
            "team",
            "cluster",
            "source_grant",
            "gpu_model",
            "gpus",
            "kind",
            "mig_profile",
            "replicas",
            "slices",
            "slice_resource",
            "ends_on",
            "justification",
            "requested_by",
            "state",
            "created_at",
            "decided_by",
            "decided_at",
            "decision_note",
            "nodes",
            "progress",
            "error",
            "slice_grant",
            "returned_grant",
            "applied_at",
            "reverted_at",
        ]
        read_only_fields = fields


class LayoutCreateSerializer(serializers.Serializer):
    """Types and shapes only; ``services.layout_create`` checks the rest."""

    team = serializers.CharField(help_text="Team slug.")
    source_grant = serializers.IntegerField(
        min_value=1, help_text="A grant of the team's whole GPUs of one model."
    )
    gpus = serializers.IntegerField(min_value=1, help_text="Whole GPUs of the grant to convert.")
    kind = serializers.ChoiceField(choices=LayoutRequest.Kind.choices)
    mig_profile = serializers.CharField(
        default="", allow_blank=True, max_length=20, help_text='MIG only, e.g. "1g.10gb".'
    )
    replicas = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="Shared only: 2, 4 or 8."
    )
    ends_on = serializers.DateField(help_text="The last day; reverted after it.")
    justification = StringField(allow_blank=True, trim_whitespace=False, max_length=MAX_TEXT_LENGTH)

    def validate_team(self, slug: str) -> Team:
        # Invisible teams read as unknown: the answer never says whether they exist.
        team = teams_visible_to(self.context["request"].user).filter(slug=slug).first()
        if team is None:
            raise serializers.ValidationError(f"No team with slug {slug!r}.")
        return team

    def validate_source_grant(self, pk: int) -> QuotaGrant:
        grant = quota_grants_visible_to(self.context["request"].user).filter(pk=pk).first()
        if grant is None:
            raise serializers.ValidationError(f"No grant #{pk}.")
        return grant


class LayoutDecisionSerializer(serializers.Serializer):
    note = StringField(required=False, allow_blank=True, default="", max_length=MAX_NOTE_LENGTH)
