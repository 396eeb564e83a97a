"""A team's members and their roles."""

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.response import Response

from tenants import services
from tenants.api.serializers.members import (
    MembershipRoleSerializer,
    MembershipSerializer,
    MembershipSetSerializer,
)
from tenants.api.views.base import TEAM_SLUG, TeamNestedViewSet
from tenants.models import Membership

USERNAME = OpenApiParameter("username", str, OpenApiParameter.PATH, description="Username.")


@extend_schema_view(
    list=extend_schema(summary="Members of a team you belong to", parameters=[TEAM_SLUG]),
    retrieve=extend_schema(parameters=[TEAM_SLUG, USERNAME]),
    create=extend_schema(
        summary="Add a member or change their role (admins)",
        parameters=[TEAM_SLUG],
        request=MembershipSetSerializer,
        responses={200: MembershipSerializer},
    ),
    partial_update=extend_schema(
        summary="Change a member's role (admins)",
        parameters=[TEAM_SLUG, USERNAME],
        request=MembershipRoleSerializer,
        responses=MembershipSerializer,
    ),
    destroy=extend_schema(
        summary="Remove a member (admins)",
        parameters=[TEAM_SLUG, USERNAME],
        responses={204: None},
    ),
)
class TeamMembershipViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TeamNestedViewSet):
    serializer_class = MembershipSerializer
    action_serializers = {
        "create": MembershipSetSerializer,
        "partial_update": MembershipRoleSerializer,
    }
    lookup_field = "user__username"
    lookup_url_kwarg = "username"
    lookup_value_regex = r"[\w.@+-]+"
    ordering_fields = ["created_at", "role"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    admin_actions = {
        "create": "change team memberships",
        "partial_update": "change team memberships",
        "destroy": "change team memberships",
    }

    def check_permissions(self, request):
        # Answer 401, then 404 for a team the user cannot see, and only then 403.
        if request.user.is_authenticated and not getattr(self, "swagger_fake_view", False):
            _ = self.team
        super().check_permissions(request)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Membership.objects.none()
        return Membership.objects.filter(team=self.team).select_related("user", "team")

    def create(self, request, *args, **kwargs):
        data = self.validated(MembershipSetSerializer)
        membership = services.membership_set(
            actor=request.user, team=self.team, user=data["username"], role=data["role"]
        )
        return self.respond(membership)

    def partial_update(self, request, *args, **kwargs):
        membership = self.get_object()
        data = self.validated(MembershipRoleSerializer)
        membership = services.membership_set(
            actor=request.user, team=self.team, user=membership.user, role=data["role"]
        )
        return self.respond(membership)

    def destroy(self, request, *args, **kwargs):
        membership = self.get_object()
        services.membership_remove(actor=request.user, team=self.team, user=membership.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
