"""Shapes of the job API's JSON. A submission's fields are checked by ``JobRequest.parse`` (the
one place the API and the job form share); the team's and the cluster's rules are in
``gpujobs.admission``."""

from collections.abc import Mapping

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from gpujobs import admission, specs
from gpujobs.images import MAX_IMAGE_LENGTH
from gpujobs.models import GpuJob
from gpujobs.specs import PREPROCESS_MODES, PreprocessMode
from tenants.models import Team
from tenants.selectors import teams_visible_to

LIST_KEYS = ("command", "args")


class EnvVarSerializer(serializers.Serializer):
    name = serializers.CharField(trim_whitespace=False)
    value = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, default=""
    )


class PreprocessSerializer(serializers.Serializer):
    """A CPU-only container that runs before (init container) or beside the GPU container."""

    image = serializers.CharField()
    mode = serializers.ChoiceField(
        choices=list(PREPROCESS_MODES),
        default=PreprocessMode.BEFORE,
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
    cancelled_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
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
    """A job submission. Team and cluster are looked up here; the job's own fields are declared
    for the OpenAPI schema and read by ``admission.parse_job_request`` into a ``JobRequest``,
    so that the API and the job form check them the same way, and one 400 names every bad
    field. Validated data: ``team``, ``cluster`` and ``job_request``."""

    team = serializers.SlugRelatedField(
        slug_field="slug", queryset=Team.objects.none(), help_text="Team slug."
    )
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), help_text="Cluster name."
    )
    name = serializers.CharField(
        max_length=specs.MAX_NAME_LENGTH, help_text="A short name for people."
    )
    image = serializers.CharField(max_length=MAX_IMAGE_LENGTH)
    command = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text="Replaces the image's entrypoint: a list, one item per argument.",
    )
    args = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
    )
    env = EnvVarSerializer(many=True, required=False)
    gpus = serializers.IntegerField(min_value=1, max_value=specs.MAX_GPUS_PER_JOB)
    gpu_resource = serializers.CharField(required=False, default=DEFAULT_GPU_RESOURCE)
    gpu_model = serializers.CharField(required=False, allow_blank=True, default="")
    cpu_cores = serializers.DecimalField(
        max_digits=7, decimal_places=2, required=False, allow_null=True
    )
    memory_gib = serializers.DecimalField(
        max_digits=8, decimal_places=2, required=False, allow_null=True
    )
    max_runtime_seconds = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=specs.MAX_RUNTIME_SECONDS,
        help_text="Stopped after this long (activeDeadlineSeconds).",
    )
    backoff_limit = serializers.IntegerField(
        required=False, min_value=0, max_value=specs.MAX_BACKOFF_LIMIT
    )
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

    def to_internal_value(self, data):
        if not isinstance(data, Mapping):
            message = self.error_messages["invalid"].format(datatype=type(data).__name__)
            raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [message]})
        if isinstance(data, QueryDict):  # a form-encoded body: lists are repeated keys
            data = {k: data.getlist(k) if k in LIST_KEYS else data.get(k) for k in data}
        errors, values = {}, {}
        for name in ("team", "cluster"):
            field = self.fields[name]
            try:
                values[name] = field.run_validation(field.get_value(data))
            except serializers.ValidationError as error:
                errors[name] = error.detail
        try:
            values["job_request"] = admission.parse_job_request(
                data, team=values.get("team"), cluster=values.get("cluster")
            )
        except DjangoValidationError as error:
            errors.update(error.message_dict)
        if errors:
            raise serializers.ValidationError(errors)
        return values


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
