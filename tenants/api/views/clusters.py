"""Clusters and their settings."""

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins

from clusters.models import Cluster
from tenants import cluster_settings, queueing, selectors, services
from tenants.api.serializers.clusters import ClusterSerializer, ClusterSettingsSerializer
from tenants.api.views.base import SLUG, PortalViewSet


@extend_schema_view(
    list=extend_schema(summary="Clusters with capacity per GPU kind and per GPU model"),
    partial_update=extend_schema(
        summary="Change a cluster's overcommit ratio, quota mode or allowed registries (admins)",
        request=ClusterSettingsSerializer,
        responses=ClusterSerializer,
    ),
)
class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, PortalViewSet):
    serializer_class = ClusterSerializer
    action_serializers = {"partial_update": ClusterSettingsSerializer}
    lookup_field = "name"
    lookup_value_regex = SLUG
    ordering_fields = ["name", "created_at"]
    http_method_names = ["get", "patch", "head", "options"]
    admin_actions = {"partial_update": "change a cluster's settings"}

    def get_queryset(self):
        # Every signed-in user may see the clusters and their capacity: it is what they plan with.
        return Cluster.objects.prefetch_related("gpu_capacities")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["capacity"] = selectors.capacity_summaries()
        context["model_capacity"] = selectors.model_capacity_summaries()
        return context

    def partial_update(self, request, *args, **kwargs):
        cluster = self.get_object()
        data = self.validated(ClusterSettingsSerializer)
        # All or none: a setting refused after another was written takes that one back.
        with transaction.atomic():
            cluster = self._change(cluster, data)
        return self.respond(cluster)

    def _change(self, cluster: Cluster, data: dict) -> Cluster:
        request = self.request
        if "allowed_registries" in data or "allow_all_registries" in data:
            cluster = cluster_settings.cluster_set_registries(
                actor=request.user,
                cluster=cluster,
                allowed_registries=data.get("allowed_registries"),
                allow_all_registries=data.get("allow_all_registries"),
            )
        if "overcommit_ratio" in data:
            cluster = services.cluster_set_overcommit(
                actor=request.user, cluster=cluster, ratio=data["overcommit_ratio"]
            )
        if "quota_mode" in data:
            cluster = queueing.cluster_set_quota_mode(
                actor=request.user, cluster=cluster, quota_mode=data["quota_mode"]
            )
        if borrowing := {f: data[f] for f in queueing.BORROWING_FIELDS if f in data}:
            cluster = queueing.cluster_set_borrowing(
                actor=request.user, cluster=cluster, **borrowing
            )
        return cluster
