"""A team's queue policy on each Kueue cluster."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins

from clusters.models import Cluster
from tenants import queueing, selectors
from tenants.api.serializers.queue_policies import (
    TeamQueuePolicySerializer,
    TeamQueuePolicySetSerializer,
)
from tenants.api.views.base import CLUSTER_NAME, SLUG, TEAM_SLUG, TeamNestedViewSet
from tenants.models import TeamQueuePolicy


@extend_schema_view(
    list=extend_schema(
        summary="The team's queue policy on each cluster it has one on", parameters=[TEAM_SLUG]
    ),
    retrieve=extend_schema(parameters=[TEAM_SLUG, CLUSTER_NAME]),
    update=extend_schema(
        summary="Set the team's borrowing and lending limits and fair-sharing weight (admins)",
        parameters=[TEAM_SLUG, CLUSTER_NAME],
        request=TeamQueuePolicySetSerializer,
        responses=TeamQueuePolicySerializer,
    ),
)
class TeamQueuePolicyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TeamNestedViewSet):
    """How the team shares GPUs on a Kueue cluster. Without a policy a team borrows and lends
    without limit at weight 1; setting one needs no existing row (PUT creates it)."""

    serializer_class = TeamQueuePolicySerializer
    action_serializers = {"update": TeamQueuePolicySetSerializer}
    lookup_field = "cluster__name"
    lookup_url_kwarg = "cluster"
    lookup_value_regex = SLUG
    ordering_fields = ["updated_at"]
    http_method_names = ["get", "put", "head", "options"]
    admin_actions = {"update": "set a team's queue policy"}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return TeamQueuePolicy.objects.none()
        return (
            selectors.queue_policies_visible_to(self.request.user)
            .filter(team=self.team)
            .order_by("cluster__name")
        )

    def update(self, request, team_slug=None, cluster=None):
        # A team the user may not see is a 404; one they may see but not change, a 403, both
        # before anything is said about the body.
        self.check_object_permissions(request, self.team)
        target = get_object_or_404(Cluster, name=cluster)
        data = self.validated(TeamQueuePolicySetSerializer)
        policy = queueing.team_queue_policy_set(
            actor=request.user, team=self.team, cluster=target, **data
        )
        return self.respond(policy)
