"""REST views for GPU jobs under /api/v1/jobs/: find the job among those the user may see (another
team's job is a 404, never a 403 that confirms it exists), read the body (a submission becomes a
``JobRequest`` in its serializer), call a service.

Cluster reads (logs, events) that fail raise ``KubeError``, which ``portal.api`` answers with
503 (worth retrying: the cluster is unreachable or busy) or 502 (the cluster refused), with the
cluster's reason in words. Error answers are declared in the schema by ``core.openapi``.
"""

from django.db import connection
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, Throttled, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from core.openapi import ErrorSerializer
from core.rows import RowListMixin, row_shape
from gpujobs import cluster_reads, queue_reads, selectors, services
from gpujobs.api import serializers as s
from gpujobs.filtersets import GpuJobFilter
from gpujobs.manifests import GPU_CONTAINER
from tenants.api.filters import PortalFilterBackend, StableOrderingFilter
from tenants.selectors import teams_visible_to
from workloads import log_follows
from workloads.api.logs import (
    TAIL,
    container_parameter,
    events_action,
    events_answer,
    log_answer,
    log_container,
    log_pod,
    log_tail,
)
from workloads.api.serializers import LogSerializer

CONTAINER = container_parameter(
    cluster_reads.CONTAINERS,
    description="The GPU container (main, default) or the preprocessing one.",
)
POD = OpenApiParameter("pod", str, description="One of the job's pods (default: the newest).")
FOLLOW = OpenApiParameter(
    "follow",
    bool,
    description="Stream the log as text/plain while the container runs (after the last N "
    "lines), for up to GPUJOBS_LOG_FOLLOW_MAX_SECONDS. A user may follow "
    "GPUJOBS_LOG_FOLLOWS_PER_USER logs at once.",
)


class PlainTextRenderer(BaseRenderer):
    """``Accept: text/plain`` on the log endpoint: the log itself (or why there is none)."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict):
            text = data.get("log") or data.get("detail") or ""
            return str(text).encode(self.charset)
        return str(data or "").encode(self.charset)


@extend_schema_view(
    list=extend_schema(summary="GPU jobs of your teams (admins: all)"),
    create=extend_schema(
        summary="Submit a GPU job",
        description="Refused with 400 naming the field when the image comes from a registry "
        "the cluster does not allow (`image`), or when the GPUs can never be had: under quota "
        "only, when the team's quota on the cluster has too few GPUs left (`gpus`); on a Kueue "
        "cluster, where a job that does not fit now waits in the team's queue instead, only "
        "when it could never run (`gpus`: more than one node has, a guaranteed job beyond the "
        "team's own quota, an opportunistic one beyond what it may borrow). Leads and members "
        "may submit; viewers may not (403).",
        request=s.GpuJobCreateSerializer,
        responses={201: s.GpuJobSerializer},
    ),
)
class GpuJobViewSet(
    RowListMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.GpuJobSerializer
    permission_classes = [IsAuthenticated]
    lookup_value_regex = r"\d+"
    filter_backends = [PortalFilterBackend, StableOrderingFilter]
    filterset_class = GpuJobFilter
    ordering_fields = ["created_at", "state", "gpus", "started_at", "finished_at"]
    ordering = ["-created_at"]
    reads_cluster = False  # the logs and events actions do

    def get_queryset(self):
        return selectors.jobs_visible_to(self.request.user).select_related("cancelled_by")

    def finalize_response(self, request, response, *args, **kwargs):
        # An error answers JSON even to a client that asked for the log as text: its body names
        # the field that was wrong, which the text renderer would drop.
        if response.status_code >= 400 and isinstance(
            getattr(request, "accepted_renderer", None), PlainTextRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

    def get_serializer_class(self):
        if self.action == "create":
            return s.GpuJobCreateSerializer
        return s.GpuJobSerializer

    def create(self, request, *args, **kwargs):
        serializer = s.GpuJobCreateSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        job = services.job_submit(user=request.user, **serializer.validated_data)
        job = self.get_queryset().get(pk=job.pk)
        return Response(s.GpuJobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Submit many GPU jobs of one team on one cluster at once",
        description="A sweep in one call: each job is held to every rule of a single "
        "submission, and they are stored all or none. A 400 names each refused job's fields "
        "under `jobs`, by its place in the list (`{}` for a job that breaks no rule); under "
        "quota only, jobs that fit one by one but not together are refused under `jobs`. "
        "Each is then created on the cluster as a single submission is.",
        request=s.GpuJobBatchSerializer,
        responses={201: s.GpuJobBatchResultSerializer},
    )
    @action(detail=False, methods=["post"])
    def batch(self, request):
        serializer = s.GpuJobBatchSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        try:
            jobs = services.job_submit_many(user=request.user, **serializer.validated_data)
        except services.JobsRefused as refused:
            raise ValidationError({"jobs": refused.field_errors()}) from None
        shape = row_shape(s.GpuJobSerializer)
        rows = shape.rows(self.get_queryset().filter(pk__in=[job.pk for job in jobs]))
        items = shape.represent(rows.order_by("pk"), context=self.get_serializer_context())
        return Response({"jobs": items}, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Stop a job: its Job and pods are deleted and it shows cancelled",
        request=None,
        responses=s.GpuJobSerializer,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = services.job_cancel(actor=request.user, job=self.get_object())
        return Response(s.GpuJobSerializer(self.get_queryset().get(pk=job.pk)).data)

    @extend_schema(
        summary="The job's log: the last N lines, or followed as it is written",
        parameters=[TAIL, CONTAINER, POD, FOLLOW],
        responses={
            (200, "application/json"): LogSerializer,
            (200, "text/plain"): OpenApiTypes.STR,
            409: OpenApiResponse(
                ErrorSerializer, description="follow: the container is not running."
            ),
            429: OpenApiResponse(
                ErrorSerializer,
                description="follow: you (or the portal) follow as many logs as allowed at once; "
                "try again after the Retry-After header's seconds.",
            ),
        },
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, PlainTextRenderer],
        reads_cluster=True,
    )
    def logs(self, request, pk=None):
        job = self.get_object()
        tail = log_tail(request)
        container = log_container(
            request, containers=cluster_reads.CONTAINERS, default=GPU_CONTAINER
        )
        pod = log_pod(request)
        follow = request.query_params.get("follow", "").lower() in ("1", "true", "yes")
        if follow:
            return self._follow(request, job, tail=tail, container=container, pod=pod)
        result = cluster_reads.job_log(job, tail=tail, container=container, pod=pod)
        return log_answer(result, tail=tail)

    def _follow(self, request, job, *, tail: int, container: str, pod: str | None):
        try:
            slot = log_follows.take_slot(user_id=request.user.pk)
        except log_follows.TooManyFollows as error:
            raise Throttled(wait=log_follows.RETRY_AFTER_SECONDS, detail=str(error)) from None
        try:
            name, lines, detail = cluster_reads.follow_job_log(
                job, tail=tail, container=container, pod=pod
            )
        except BaseException:
            slot.release()
            raise
        if lines is None:
            slot.release()
            return Response({"detail": detail}, status=status.HTTP_409_CONFLICT)
        # The stream lasts minutes and reads nothing from the database: give the request's
        # connection back now (to the process's pool, when there is one) rather than when the
        # stream ends, so that follows never hold the connections pages need. Not inside a
        # transaction (ATOMIC_REQUESTS is off; a test's transaction must stay whole).
        if not connection.in_atomic_block:
            connection.close()
        # An async iterator: under the ASGI worker the stream holds no worker or thread.
        response = StreamingHttpResponse(
            log_follows.stream(lines, slot=slot), content_type="text/plain; charset=utf-8"
        )
        response["X-Pod"] = name
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # proxies must pass lines on as they come
        return response

    @events_action("Events of the job's Job and pods (scheduling, pulling, quota refusals)")
    def events(self, request, pk=None):
        return events_answer(cluster_reads.job_events(self.get_object()))


@extend_schema(
    summary="A team's queue on a cluster: GPUs own, borrowed, lent and idle; admitted and "
    "waiting jobs with why they wait, their positions and estimated start",
    parameters=[
        OpenApiParameter("cluster", str, required=True, description="The cluster's name."),
    ],
    responses={200: s.TeamQueueSerializer},
)
class TeamQueueView(APIView):
    """``GET /api/v1/teams/{slug}/queue/?cluster=``: for everyone in the team (and admins);
    another team's is a 404."""

    permission_classes = [IsAuthenticated]

    def get(self, request, team_slug: str):
        team = teams_visible_to(request.user).filter(slug=team_slug).first()
        if team is None:
            raise NotFound("No such team.")
        name = request.query_params.get("cluster") or ""
        if not name:
            raise ValidationError({"cluster": ["Give the cluster's name: ?cluster=<name>."]})
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise ValidationError({"cluster": [f"There is no cluster named {name!r}."]})
        jobs = (
            selectors.jobs_visible_to(request.user)
            .filter(team=team, cluster=cluster, state__in=selectors.ACTIVE_STATES)
            .order_by("pk")
        )
        queue = queue_reads.team_queue(team=team, cluster=cluster, jobs=list(jobs))
        return Response(s.TeamQueueSerializer(queue).data)
