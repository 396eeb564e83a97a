"""Shapes of the job API's JSON. A submission's fields are checked by ``JobRequest.parse`` (the
one place the API and the job form share); the team's and the cluster's rules are in
``gpujobs.admission``."""

from collections.abc import Mapping

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from clusters.vocabulary import DEFAULT_GPU_RESOURCE, GUARANTEED
from gpujobs import admission, queue_reads, specs
from gpujobs.manifests import job_name
from gpujobs.models import GpuJob
from gpujobs.specs import PREPROCESS_MODES, PRIORITY_HELP, PreprocessMode
from workloads.admission import field_errors
from workloads.api.serializers import EnvVarSerializer, TeamClusterFields
from workloads.images import MAX_IMAGE_LENGTH
from workloads.specs import MAX_GPUS_PER_POD, MAX_NAME_LENGTH

LIST_KEYS = ("command", "args")


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


class QueueFiguresSerializer(serializers.Serializer):
    """The numbers behind ``why``, for the GPU flavor the job waits for."""

    gpu_model = serializers.CharField(help_text='The flavor\'s GPU model ("" for any model).')
    flavor = serializers.CharField(help_text="Kueue's ResourceFlavor.")
    own = serializers.IntegerField(help_text="The team's own GPUs of the flavor.")
    in_use = serializers.IntegerField(help_text="GPUs of the flavor the team's jobs use.")
    idle_in_cohort = serializers.IntegerField(
        help_text="GPUs of the flavor idle in the cohort, which the team could borrow."
    )
    may_borrow = serializers.IntegerField(
        allow_null=True, help_text="GPUs the team may still borrow (null: no limit)."
    )
    free_now = serializers.IntegerField(help_text="GPUs free for this job now.")


class QueueStatusSerializer(serializers.Serializer):
    """Where a job that waits in Kueue stands (null when it does not wait there)."""

    why = serializers.CharField(help_text="Why it waits, in words and numbers.")
    position_in_team_queue = serializers.IntegerField(
        allow_null=True, source="positions.team_queue", help_text="1-based; from Kueue."
    )
    team_queue_length = serializers.IntegerField(source="positions.team_queue_length")
    position_in_cluster = serializers.IntegerField(
        allow_null=True,
        source="positions.cluster",
        help_text="1-based, among every pending job of the cluster's cohort, in the order Kueue "
        "takes them (priority, then age).",
    )
    cluster_queue_length = serializers.IntegerField(source="positions.cluster_length")
    estimated_start = serializers.DateTimeField(
        allow_null=True,
        help_text="When it may start at the latest, from the running jobs' maximum run times "
        "(null: no estimate).",
    )
    kueue_admitting = serializers.BooleanField()
    figures = QueueFiguresSerializer(source="explanation", allow_null=True)
    as_of = serializers.DateTimeField(allow_null=True, help_text="When Kueue was last read.")


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
    queue = serializers.CharField(source="queue_name", read_only=True)
    queue_status = serializers.SerializerMethodField()

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
            "priority",
            "queue",
            "admitted_at",
            "preemptions",
            "preempted_at",
            "preempted_by",
            "preemption_reason",
            "preemption_stopped_at",
            "queue_status",
        ]
        read_only_fields = fields

    # The list reads jobs as rows (core.rows): ``job`` is then the row, with its columns,
    # ``pk`` and ``team.slug``; a job waiting in Kueue is read whole by ``prepare_rows``.

    @extend_schema_field(KubernetesRefSerializer)
    def get_kubernetes(self, job: GpuJob) -> dict:
        return {"namespace": job.team.slug, "job_name": job_name(job.pk), "uid": job.kube_uid}

    def prepare_rows(self, jobs: list) -> None:
        """The queue status of each job of a page of rows that waits in Kueue: those jobs read
        whole in one query (their status reads their team and cluster), each cluster's queue
        facts read once."""
        waiting = [job.pk for job in jobs if queue_reads.waits_in_kueue(job)]
        whole = GpuJob.objects.select_related("team", "cluster").in_bulk(waiting) if waiting else {}
        self.context["queue_statuses"] = queue_reads.queue_statuses(
            whole.values(), reads=self.context.setdefault("queue_reads", {})
        )

    @extend_schema_field(QueueStatusSerializer(allow_null=True))
    def get_queue_status(self, job: GpuJob) -> dict | None:
        if not queue_reads.waits_in_kueue(job):
            return None
        if "queue_statuses" in self.context:
            status = self.context["queue_statuses"].get(job.pk)
        else:
            status = queue_reads.queue_statuses(
                [job], reads=self.context.setdefault("queue_reads", {})
            ).get(job.pk)
        return QueueStatusSerializer(status).data if status is not None else None


def _as_dict(data) -> Mapping:
    """A body's fields as a mapping (a form-encoded body's lists are repeated keys)."""
    if isinstance(data, QueryDict):
        return {k: data.getlist(k) if k in LIST_KEYS else data.get(k) for k in data}
    return data


class JobFieldsSerializer(serializers.Serializer):
    """A job's own fields, declared for the OpenAPI schema: ``admission.parse_job_request``
    reads them into a ``JobRequest``, so that the API and the job form check them the same
    way, and one 400 names every bad field."""

    name = serializers.CharField(max_length=MAX_NAME_LENGTH, help_text="A short name for people.")
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
    gpus = serializers.IntegerField(min_value=1, max_value=MAX_GPUS_PER_POD)
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
    priority = serializers.ChoiceField(
        choices=GpuJob.Priority.choices,
        required=False,
        default=GUARANTEED,
        help_text=f"{PRIORITY_HELP} Under quota only (no Kueue) both run alike.",
    )


def _not_an_object(serializer: serializers.Serializer, data) -> list[str]:
    return [serializer.error_messages["invalid"].format(datatype=type(data).__name__)]


class GpuJobCreateSerializer(TeamClusterFields, JobFieldsSerializer):
    """A job submission: its team and cluster, looked up here, and the job's own fields.
    Validated data: ``team``, ``cluster`` and ``job_request``."""

    def to_internal_value(self, data):
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: _not_an_object(self, data)}
            )
        errors = {}
        values = self.read_request(
            _as_dict(data), errors, parse=admission.parse_job_request, key="job_request"
        )
        if errors:
            raise serializers.ValidationError(errors)
        return values


class GpuJobBatchSerializer(TeamClusterFields):
    """Many jobs of one team on one cluster in one submission (a sweep): each job has the
    fields of one submission but ``team`` and ``cluster``. A 400 names each bad job's fields
    under ``jobs``, by the job's place in the list (``{}`` for a good one). Validated data:
    ``team``, ``cluster`` and ``job_requests``."""

    jobs = JobFieldsSerializer(
        many=True,
        help_text=f"From 1 to {specs.MAX_BATCH_JOBS} jobs, all stored or none.",
    )

    def to_internal_value(self, data):
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: _not_an_object(self, data)}
            )
        errors: dict = {}
        values = self.read_team_and_cluster(data, errors)
        items = data.get("jobs")
        if not isinstance(items, list) or not 1 <= len(items) <= specs.MAX_BATCH_JOBS:
            errors["jobs"] = [f"A list of 1 to {specs.MAX_BATCH_JOBS} jobs is required."]
            raise serializers.ValidationError(errors)
        team, cluster = values.get("team"), values.get("cluster")
        requests: dict[int, specs.JobRequest] = {}
        per_job: list[dict] = []
        for index, item in enumerate(items):
            per_job.append({})
            if not isinstance(item, Mapping):
                per_job[index] = {api_settings.NON_FIELD_ERRORS_KEY: _not_an_object(self, item)}
                continue
            try:
                requests[index] = admission.parse_job_request(item, team=team, cluster=cluster)
            except DjangoValidationError as error:
                per_job[index] = error.message_dict
        if any(per_job):
            # One 400 names every bad field: the jobs whose shape is right are judged by the
            # team's and the cluster's rules too (the service judges them when none is wrong).
            if team is not None and cluster is not None:
                refusals = admission.submission_refusals(
                    team=team, cluster=cluster, job_requests=list(requests.values())
                )
                for index, refused in zip(requests, refusals, strict=True):
                    per_job[index] = field_errors(refused)
            errors["jobs"] = per_job
        if errors:
            raise serializers.ValidationError(errors)
        return {**values, "job_requests": list(requests.values())}


class GpuJobBatchResultSerializer(serializers.Serializer):
    """The jobs a batch stored, in its order."""

    jobs = GpuJobSerializer(many=True)


class QueueJobSerializer(serializers.ModelSerializer):
    """A job in a team's queue."""

    queue = serializers.CharField(source="queue_name", read_only=True)

    class Meta:
        model = GpuJob
        fields = [
            "id",
            "name",
            "priority",
            "queue",
            "gpus",
            "gpu_model",
            "state",
            "reason",
            "message",
            "created_at",
            "admitted_at",
            "started_at",
            "admitted_flavor",
            "max_runtime_seconds",
            "preemptions",
            "preempted_at",
            "preempted_by",
        ]
        read_only_fields = fields


class WaitingJobSerializer(QueueJobSerializer):
    queue_status = QueueStatusSerializer()

    class Meta(QueueJobSerializer.Meta):
        fields = [*QueueJobSerializer.Meta.fields, "queue_status"]
        read_only_fields = fields

    def to_representation(self, item):
        """``item``: (job, its queue status)."""
        job, status = item
        data = QueueJobSerializer(job, context=self.context).data
        data["queue_status"] = QueueStatusSerializer(status).data
        return data


class TeamFlavorUsageSerializer(serializers.Serializer):
    """The team's GPUs of one flavor in its cohort."""

    gpu_model = serializers.CharField(help_text='"" for a flavor of any model.')
    flavor = serializers.CharField()
    own = serializers.IntegerField(help_text="Its guaranteed quota.")
    in_use = serializers.IntegerField()
    guaranteed_used = serializers.IntegerField()
    opportunistic_used = serializers.IntegerField()
    borrowed = serializers.IntegerField(help_text="Other teams' idle GPUs it uses.")
    lent = serializers.IntegerField(help_text="Its idle GPUs other teams use.")
    idle = serializers.IntegerField(help_text="Its GPUs nobody uses.")
    borrowing_limit = serializers.IntegerField(allow_null=True)
    lending_limit = serializers.IntegerField(allow_null=True)


class HeldOutsideSerializer(serializers.Serializer):
    """The GPUs a team's pods hold that Kueue did not admit."""

    gpus = serializers.IntegerField()
    pods = serializers.IntegerField()
    pod_names = serializers.ListField(
        child=serializers.CharField(), source="names", help_text="The first ten, by name."
    )


class TeamQueueSerializer(serializers.Serializer):
    """A team's queue on one cluster: its GPUs per flavor and its admitted and waiting jobs."""

    team = serializers.CharField(source="team.slug")
    cluster = serializers.CharField(source="cluster.name")
    kueue = serializers.BooleanField(help_text="Whether Kueue enforces the cluster's quota.")
    kueue_admitting = serializers.SerializerMethodField()
    kueue_error = serializers.CharField()
    as_of = serializers.DateTimeField(allow_null=True)
    borrowed = serializers.IntegerField()
    lent = serializers.IntegerField()
    gpus = TeamFlavorUsageSerializer(source="usage", many=True)
    admitted = QueueJobSerializer(many=True)
    waiting = WaitingJobSerializer(many=True, help_text="In the order Kueue takes them.")
    held_outside_the_queue = HeldOutsideSerializer(
        source="held_outside",
        help_text="GPUs held in the team's namespace by pods Kueue did not admit (made before "
        "the cluster was switched to Kueue mode): the namespace's quota counts them, Kueue "
        "does not.",
    )

    def get_kueue_admitting(self, queue) -> bool:
        return not queue.kueue_error
