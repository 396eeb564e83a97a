"""Quota grants: what was granted, shrinking one, and a preview of what a change would do."""

from rest_framework import serializers

from clusters.models import QuotaMode
from core.fields import StringField
from core.validators import MAX_NOTE_LENGTH
from tenants.api.serializers.quota_requests import QUOTA_FIELDS
from tenants.impact import RULE
from tenants.models import QuotaGrant


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
