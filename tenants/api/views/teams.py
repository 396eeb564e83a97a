"""Teams, and their namespaces on each cluster."""

from functools import cached_property

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action

from core.rows import RowListMixin
from tenants import departments, selectors, services
from tenants.api.serializers.teams import (
    NamespaceDeleteSerializer,
    TeamArchiveSerializer,
    TeamClusterSerializer,
    TeamCreateSerializer,
    TeamDepartmentSerializer,
    TeamSerializer,
)
from tenants.api.views.base import CLUSTER_NAME, SLUG, TEAM_SLUG, PortalViewSet, TeamNestedViewSet
from tenants.models import Membership, TeamCluster


@extend_schema_view(
    list=extend_schema(summary="Teams you belong to (admins: all teams)"),
    create=extend_schema(
        summary="Create a team (admins)",
        request=TeamCreateSerializer,
        responses={201: TeamSerializer},
    ),
)
class TeamViewSet(RowListMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, PortalViewSet):
    serializer_class = TeamSerializer
    action_serializers = {"create": TeamCreateSerializer}
    lookup_field = "slug"
    lookup_value_regex = SLUG
    ordering_fields = ["slug", "name", "created_at"]
    admin_actions = {
        "create": "create teams",
        "archive": "archive teams",
        "department": "move teams between departments",
    }

    def get_queryset(self):
        return selectors.teams_visible_to(self.request.user)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["roles"] = self.my_roles
        return context

    @cached_property
    def my_roles(self) -> dict[int, str]:
        """The user's role per team id, read once per request rather than once per row."""
        user = self.request.user
        if not user.is_authenticated:
            return {}
        return dict(Membership.objects.filter(user=user).order_by().values_list("team_id", "role"))

    def create(self, request, *args, **kwargs):
        data = self.validated(TeamCreateSerializer)
        team = services.team_create(actor=request.user, **data)
        return self.respond(team, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Put the team in a department, or in none (admins)",
        request=TeamDepartmentSerializer,
        responses=TeamSerializer,
    )
    @action(detail=True, methods=["put"], url_path="department")
    def department(self, request, slug=None):
        team = self.get_object()
        data = self.validated(TeamDepartmentSerializer)
        team = departments.team_set_department(
            actor=request.user, team=team, department=data["department"]
        )
        return self.respond(team)

    @extend_schema(
        summary="Archive a team: revoke its grants, remove its access and quota (admins)",
        request=TeamArchiveSerializer,
        responses=TeamSerializer,
    )
    @action(detail=True, methods=["post"])
    def archive(self, request, slug=None):
        team = self.get_object()
        data = self.validated(TeamArchiveSerializer)
        return self.respond(services.team_archive(actor=request.user, team=team, **data))


@extend_schema_view(
    list=extend_schema(
        summary="The team's namespace on each cluster: in sync, or the last error",
        parameters=[TEAM_SLUG],
    ),
    retrieve=extend_schema(parameters=[TEAM_SLUG, CLUSTER_NAME]),
)
class TeamClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TeamNestedViewSet):
    serializer_class = TeamClusterSerializer
    action_serializers = {"delete_namespace": NamespaceDeleteSerializer}
    lookup_field = "cluster__name"
    lookup_url_kwarg = "cluster"
    lookup_value_regex = SLUG
    ordering_fields = ["last_applied_at"]
    admin_actions = {"delete_namespace": "delete a team's namespace"}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return TeamCluster.objects.none()
        return (
            TeamCluster.objects.filter(team=self.team)
            .select_related("team", "cluster")
            .order_by("cluster__name")
        )

    @extend_schema(
        summary="Delete an archived team's namespace and everything in it (admins)",
        parameters=[TEAM_SLUG, CLUSTER_NAME],
        request=NamespaceDeleteSerializer,
        responses=TeamClusterSerializer,
    )
    @action(detail=True, methods=["post"], url_path="delete-namespace")
    def delete_namespace(self, request, team_slug=None, cluster=None):
        state = self.get_object()
        data = self.validated(NamespaceDeleteSerializer)
        state = services.team_namespace_delete(
            actor=request.user, team=state.team, cluster=state.cluster, confirm=data["confirm"]
        )
        return self.respond(state)
