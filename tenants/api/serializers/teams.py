"""Teams: the list and one team, creating and archiving one, its department, and where its
namespace stands on each cluster."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import StringField
from core.validators import MAX_NAME_LENGTH, MAX_NOTE_LENGTH, MAX_TEXT_LENGTH, one_line_validator
from tenants.models import Department, Team, TeamCluster


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
