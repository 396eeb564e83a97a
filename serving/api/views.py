"""REST views for inference services under /api/v1/services/: find the service among those the
user may see (another team's is a 404, never a 403 that confirms it exists), read the body into
a request object in its serializer, call a service, answer with the service as it now is.

Changes are answered at once with the service's rows; its objects reach the cluster through the
reconcile task, and its replicas' state comes back through the watcher (poll ``GET``). Cluster
reads (logs, events) that fail raise ``KubeError``, which ``portal.api`` answers with 503 or
502.
"""

from django.db.models import Prefetch
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from core.openapi import ErrorSerializer
from serving import cluster_reads, selectors, services
from serving.api import serializers as s
from serving.filtersets import InferenceServiceFilter
from serving.manifests import SERVER_CONTAINER
from serving.models import Revision
from tenants.api.filters import PortalFilterBackend, StableOrderingFilter
from workloads.api import logs as workload_logs
from workloads.api.serializers import LogSerializer

CONTAINER = workload_logs.container_parameter(
    cluster_reads.CONTAINERS, description="The model server (server, default) or the sidecar."
)
POD = OpenApiParameter("pod", str, description="One of its replicas (default: the newest).")


def _action(summary: str, request=None, *, description: str = ""):
    return extend_schema(
        summary=summary,
        description=description,
        request=request,
        responses={200: s.InferenceServiceSerializer},
    )


@extend_schema_view(
    list=extend_schema(summary="Inference services of your teams (admins: all)"),
    retrieve=extend_schema(
        summary="A service: its revisions, replicas desired and ready, traffic and rollout"
    ),
    create=extend_schema(
        summary="Deploy an inference service",
        description="A Deployment per revision with the GPU node affinity and toleration (an "
        "optional sidecar asks for no GPU), a Service in the team's namespace, and with the "
        "Gateway API an HTTPRoute. Refused with 400 naming the field on bad input, when the "
        "team's quota has too few GPUs left for replicas × GPUs (`replicas`), or when the image "
        "comes from a registry the cluster does not allow. Leads and members may deploy.",
        request=s.ServiceCreateSerializer,
        responses={201: s.InferenceServiceSerializer},
    ),
    destroy=extend_schema(
        summary="Delete the service: its objects are removed, it shows deleted once none is left",
        responses={
            202: s.InferenceServiceSerializer,
            409: OpenApiResponse(ErrorSerializer, description="It is being deleted already."),
        },
    ),
)
class InferenceServiceViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.InferenceServiceSerializer
    permission_classes = [IsAuthenticated]
    filter_backends = [PortalFilterBackend, StableOrderingFilter]
    filterset_class = InferenceServiceFilter
    ordering_fields = ["created_at", "name", "state"]
    ordering = ["-created_at"]
    reads_cluster = False  # the logs and events actions do

    def get_queryset(self):
        return selectors.services_visible_to(self.request.user).prefetch_related(
            Prefetch("revisions", queryset=Revision.objects.select_related("created_by"))
        )

    def get_serializer_class(self):
        return {
            "create": s.ServiceCreateSerializer,
            "update_revision": s.NewRevisionSerializer,
            "canary": s.CanarySerializer,
            "ab_test": s.AbTestSerializer,
            "traffic": s.TrafficSerializer,
            "promote": s.PromoteSerializer,
            "rollback": s.RollbackSerializer,
            "scale": s.ScaleSerializer,
        }.get(self.action, s.InferenceServiceSerializer)

    def _answer(self, service, code=status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=service.pk)
        return Response(s.InferenceServiceSerializer(fresh).data, status=code)

    def _body(self, request, service=None) -> dict:
        serializer = self.get_serializer_class()(
            data=request.data, context={"request": request, "service": service}
        )
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def _change(self, request, change) -> Response:
        """Read the body for the service, make ``change`` (a service of ``serving.services``),
        answer with the service as it now is."""
        service = self.get_object()
        body = self._body(request, service)
        return self._answer(change(actor=request.user, service=service, **body))

    def create(self, request, *args, **kwargs):
        body = self._body(request)
        service = services.service_deploy(user=request.user, **body)
        return self._answer(service, status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        service = services.service_delete(actor=request.user, service=self.get_object())
        return self._answer(service, status.HTTP_202_ACCEPTED)

    @_action(
        "Roll out a new revision (the fields given change, the rest is kept)",
        s.NewRevisionSerializer,
        description="It starts beside the running revision with as many replicas and takes "
        "over once all are ready. 409 while another rollout, canary or A/B test is under way.",
    )
    @action(detail=True, methods=["post"], url_path="update")
    def update_revision(self, request, pk=None):
        return self._change(request, services.service_update)

    @_action(
        "Start a canary: a new revision taking a share of the traffic",
        s.CanarySerializer,
        description="Refused with 400 (`weight`) when its replicas do not fit the team's quota.",
    )
    @action(detail=True, methods=["post"])
    def canary(self, request, pk=None):
        return self._change(request, services.service_canary)

    @_action(
        "Start an A/B test: the running revision and a new one as two named variants",
        s.AbTestSerializer,
    )
    @action(detail=True, methods=["post"], url_path="ab-test")
    def ab_test(self, request, pk=None):
        return self._change(request, services.service_ab_test)

    @_action("Set the traffic split of a canary or an A/B test", s.TrafficSerializer)
    @action(detail=True, methods=["post"])
    def traffic(self, request, pk=None):
        return self._change(request, services.service_set_traffic)

    @_action(
        "Promote the candidate (or an A/B test's variant): it takes all the traffic",
        s.PromoteSerializer,
    )
    @action(detail=True, methods=["post"])
    def promote(self, request, pk=None):
        service = self.get_object()
        variant = self._promote_variant(request)
        return self._answer(
            services.service_promote(actor=request.user, service=service, variant=variant)
        )

    def _promote_variant(self, request) -> str:
        serializer = s.PromoteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data.get("variant") or ""

    @_action(
        "Roll back: retire the candidate, or roll an earlier revision out again",
        s.RollbackSerializer,
    )
    @action(detail=True, methods=["post"])
    def rollback(self, request, pk=None):
        service = self.get_object()
        serializer = s.RollbackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return self._answer(
            services.service_rollback(
                actor=request.user,
                service=service,
                revision=serializer.validated_data.get("revision"),
            )
        )

    @_action(
        "Scale a revision (the stable one by default); a stopped service starts again",
        s.ScaleSerializer,
        description="Refused with 400 (`replicas`) when the new replicas do not fit the "
        "team's quota, with the arithmetic.",
    )
    @action(detail=True, methods=["post"])
    def scale(self, request, pk=None):
        return self._change(request, services.service_scale)

    @_action("Stop: scale every revision to zero (it holds no GPU until scaled again)")
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        return self._answer(services.service_stop(actor=request.user, service=self.get_object()))

    @extend_schema(
        summary="A replica's log: the last N lines",
        parameters=[workload_logs.TAIL, CONTAINER, POD],
        responses=LogSerializer,
    )
    @action(detail=True, methods=["get"], reads_cluster=True)
    def logs(self, request, pk=None):
        service = self.get_object()
        tail = workload_logs.log_tail(request)
        container = workload_logs.log_container(
            request, containers=cluster_reads.CONTAINERS, default=SERVER_CONTAINER
        )
        result = cluster_reads.replica_log(
            service, pod=workload_logs.log_pod(request), container=container, tail=tail
        )
        return workload_logs.log_answer(result, tail=tail)

    @workload_logs.events_action(
        "Events of the service's Deployments, ReplicaSets, pods and Services"
    )
    def events(self, request, pk=None):
        return workload_logs.events_answer(cluster_reads.service_events(self.get_object()))
