"""Shapes of the job API's JSON. Input serializers check types only; the rules (names, images,
registries, quota) live in ``gpujobs.services``."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.models import Cluster
from gpujobs import manifests
from gpujobs.models import GpuJob
from tenants.models import Team
from tenants.selectors import teams_visible_to


class EnvVarSerializer(serializers.Serializer):
    name = serializers.CharField(trim_whitespace=False)
    value = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, default=""
    )


class PreprocessSerializer(serializers.Serializer):
    """A CPU-only container that runs before (init container) or beside the GPU container."""

    image = serializers.CharField()
    mode = serializers.ChoiceField(
        choices=[manifests.PreprocessMode.BEFORE, manifests.PreprocessMode.BESIDE],
        default=manifests.PreprocessMode.BEFORE,
    )
    command = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
    )
    args = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
    )
    cpu_cores = serializers.DecimalField(
        max_digits=7, decimal_places=2, required=False, allow_null=True
    )
    memory_gib = serializers.DecimalField(
        max_digits=8, decimal_places=2, required=False, allow_null=True
    )


class KubernetesRefSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    job_name = serializers.CharField()
    uid = serializers.CharField()


class GpuJobSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    submitted_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    cancelled_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    env = EnvVarSerializer(many=True, read_only=True)
    preprocess = PreprocessSerializer(read_only=True, allow_null=True)
    command = serializers.ListField(child=serializers.CharField(), read_only=True)
    args = serializers.ListField(child=serializers.CharField(), read_only=True)
    annotations = serializers.DictField(child=serializers.CharField(), read_only=True)
    pods = serializers.ListField(child=serializers.CharField(), read_only=True)
    kubernetes = serializers.SerializerMethodField()

    class Meta:
        model = GpuJob
        fields = [
            "id",
            "name",
            "team",
            "cluster",
            "submitted_by",
            "state",
            "reason",
            "message",
            "node",
            "exit_code",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
            "state_changed_at",
            "image",
            "command",
            "args",
            "env",
            "gpus",
            "gpu_resource",
            "gpu_model",
            "cpu_cores",
            "memory_gib",
            "max_runtime_seconds",
            "backoff_limit",
            "preprocess",
            "annotations",
            "pods",
            "cancelled_by",
            "kubernetes",
        ]
        read_only_fields = fields

    @extend_schema_field(KubernetesRefSerializer)
    def get_kubernetes(self, job: GpuJob) -> dict:
        return {"namespace": job.team.slug, "job_name": job.kube_name, "uid": job.kube_uid}


class GpuJobCreateSerializer(serializers.Serializer):
    team = serializers.SlugRelatedField(
        slug_field="slug", queryset=Team.objects.none(), help_text="Team slug."
    )
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), help_text="Cluster name."
    )
    name = serializers.CharField(max_length=63, help_text="A short name for people.")
    image = serializers.CharField(max_length=500)
    command = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text="Replaces the image's entrypoint: a list, one item per argument.",
    )
    args = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
    )
    env = EnvVarSerializer(many=True, required=False)
    gpus = serializers.IntegerField(min_value=1)
    gpu_resource = serializers.CharField(required=False, default="nvidia.com/gpu")
    gpu_model = serializers.CharField(required=False, allow_blank=True, default="")
    cpu_cores = serializers.DecimalField(
        max_digits=7, decimal_places=2, required=False, allow_null=True
    )
    memory_gib = serializers.DecimalField(
        max_digits=8, decimal_places=2, required=False, allow_null=True
    )
    max_runtime_seconds = serializers.IntegerField(
        required=False, help_text="Stopped after this long (activeDeadlineSeconds)."
    )
    backoff_limit = serializers.IntegerField(required=False, min_value=0)
    preprocess = PreprocessSerializer(required=False, allow_null=True)
    annotations = serializers.DictField(
        child=serializers.CharField(allow_blank=True), required=False
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        user = request.user if request is not None else None
        # Only teams the user can see: another team's slug reads as "does not exist".
        self.fields["team"].queryset = teams_visible_to(user) if user else Team.objects.none()


class LogSerializer(serializers.Serializer):
    pod = serializers.CharField(allow_null=True)
    container = serializers.CharField()
    tail = serializers.IntegerField()
    log = serializers.CharField(allow_blank=True)
    detail = serializers.CharField(allow_blank=True)


class JobEventSerializer(serializers.Serializer):
    time = serializers.DateTimeField(allow_null=True)
    type = serializers.CharField()
    reason = serializers.CharField()
    object = serializers.CharField()
    message = serializers.CharField(allow_blank=True)
    count = serializers.IntegerField()
