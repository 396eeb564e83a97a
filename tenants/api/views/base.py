"""What every view set of the API shares: who may do what, input and answers, the team of a
view set under ``teams/{team_slug}/``, and the path parameters of the schema."""

from functools import cached_property

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status, viewsets
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response

from tenants import selectors
from tenants.api.filters import PortalFilterBackend, StableOrderingFilter
from tenants.permissions import can_review_quota, is_portal_admin

# What a team slug or cluster name in a URL may be (anything else, a NUL byte say, is a 404
# before any query: PostgreSQL refuses NUL in text).
SLUG = r"[-a-zA-Z0-9_]+"


class AdminOnlyActions(BasePermission):
    """The view's ``admin_actions`` (action -> what only admins may do) need a portal admin.

    On one object the check runs once the object was found among those the user may see, so an
    object of another team stays a 404 and a visible one a 403. The services check again.
    """

    message = "Only portal admins can do this."

    def _allowed(self, request, view) -> bool:
        what = getattr(view, "admin_actions", {}).get(view.action)
        if what is None or is_portal_admin(request.user):
            return True
        if view.action in getattr(view, "reviewer_actions", ()) and can_review_quota(request.user):
            return True  # a department admin: the service decides which requests
        self.message = f"Only portal admins can {what}."
        return False

    def has_permission(self, request, view) -> bool:
        return bool(view.detail) or self._allowed(request, view)

    def has_object_permission(self, request, view, obj) -> bool:
        return self._allowed(request, view)


class PortalViewSet(viewsets.GenericViewSet):
    permission_classes = [IsAuthenticated, AdminOnlyActions]
    filter_backends = [PortalFilterBackend, StableOrderingFilter]
    admin_actions: dict[str, str] = {}

    def get_serializer_class(self):
        # Action-specific input serializers; everything else answers with serializer_class.
        return getattr(self, "action_serializers", {}).get(self.action, self.serializer_class)

    def validated(self, serializer_class) -> dict:
        serializer = serializer_class(data=self.request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def respond(self, instance, serializer_class=None, status_code=status.HTTP_200_OK):
        serializer_class = serializer_class or self.serializer_class
        data = serializer_class(instance, context=self.get_serializer_context()).data
        return Response(data, status=status_code)


class TeamNestedViewSet(PortalViewSet):
    """A view set under ``teams/{team_slug}/``: the team must be one the user may see (else
    404, so the answer never says it exists)."""

    @cached_property
    def team(self):
        return get_object_or_404(
            selectors.teams_visible_to(self.request.user), slug=self.kwargs["team_slug"]
        )


# Path parameters of the view sets under ``teams/{team_slug}/``, for the schema.
TEAM_SLUG = OpenApiParameter("team_slug", str, OpenApiParameter.PATH, description="Team slug.")
CLUSTER_NAME = OpenApiParameter("cluster", str, OpenApiParameter.PATH, description="Cluster name.")
