"""Departments: their admins, their GPU ceilings and what their teams hold against them."""

from django.contrib.auth.models import User
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from core.fields import StringField
from core.validators import MAX_NAME_LENGTH, one_line_validator
from tenants.api.serializers.clusters import cluster_named
from tenants.ceilings import department_quota
from tenants.models import Department, DepartmentCeiling
from tenants.selectors import department_ceilings


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
