"""REST views: find the object among those the user may see, check types, call a service.

Visibility comes from ``tenants.selectors`` (another team's object is a 404, so the answer never
says it exists); what a user may do is decided by ``tenants.services`` (a 403 with its reason),
with admin-only actions refused up front by ``AdminOnlyActions`` so that a non-admin hears "no"
before any complaint about the body. Domain errors become JSON in ``portal.api``, and the error
answers are declared in the schema by ``core.openapi``.
"""

import datetime
from functools import cached_property

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from core.rows import RowListMixin
from tenants import (
    cluster_settings,
    departments,
    impact,
    queueing,
    quota,
    selectors,
    services,
)
from tenants.api import serializers as s
from tenants.api.filters import PortalFilterBackend, StableOrderingFilter
from tenants.filtersets import AuditEventFilter, QuotaGrantFilter, QuotaRequestFilter
from tenants.models import Department, Membership, TeamCluster, TeamQueuePolicy
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


# --- the current user --------------------------------------------------------------------------


class MeView(APIView):
    """The signed-in user, whether they are a portal admin, and their teams with their roles."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=s.MeSerializer)
    def get(self, request):
        memberships = Membership.objects.select_related("team").order_by("team__slug")
        user = User.objects.prefetch_related(Prefetch("memberships", queryset=memberships)).get(
            pk=request.user.pk
        )
        return Response(s.MeSerializer(user).data)


# --- teams and members -------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Teams you belong to (admins: all teams)"),
    create=extend_schema(
        summary="Create a team (admins)",
        request=s.TeamCreateSerializer,
        responses={201: s.TeamSerializer},
    ),
)
class TeamViewSet(RowListMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, PortalViewSet):
    serializer_class = s.TeamSerializer
    action_serializers = {"create": s.TeamCreateSerializer}
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
        data = self.validated(s.TeamCreateSerializer)
        team = services.team_create(actor=request.user, **data)
        return self.respond(team, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Put the team in a department, or in none (admins)",
        request=s.TeamDepartmentSerializer,
        responses=s.TeamSerializer,
    )
    @action(detail=True, methods=["put"], url_path="department")
    def department(self, request, slug=None):
        team = self.get_object()
        data = self.validated(s.TeamDepartmentSerializer)
        team = departments.team_set_department(
            actor=request.user, team=team, department=data["department"]
        )
        return self.respond(team)

    @extend_schema(
        summary="Archive a team: revoke its grants, remove its access and quota (admins)",
        request=s.TeamArchiveSerializer,
        responses=s.TeamSerializer,
    )
    @action(detail=True, methods=["post"])
    def archive(self, request, slug=None):
        team = self.get_object()
        data = self.validated(s.TeamArchiveSerializer)
        return self.respond(services.team_archive(actor=request.user, team=team, **data))


TEAM_SLUG = OpenApiParameter("team_slug", str, OpenApiParameter.PATH, description="Team slug.")
USERNAME = OpenApiParameter("username", str, OpenApiParameter.PATH, description="Username.")


@extend_schema_view(
    list=extend_schema(summary="Members of a team you belong to", parameters=[TEAM_SLUG]),
    retrieve=extend_schema(parameters=[TEAM_SLUG, USERNAME]),
    create=extend_schema(
        summary="Add a member or change their role (admins)",
        parameters=[TEAM_SLUG],
        request=s.MembershipSetSerializer,
        responses={200: s.MembershipSerializer},
    ),
    partial_update=extend_schema(
        summary="Change a member's role (admins)",
        parameters=[TEAM_SLUG, USERNAME],
        request=s.MembershipRoleSerializer,
        responses=s.MembershipSerializer,
    ),
    destroy=extend_schema(
        summary="Remove a member (admins)",
        parameters=[TEAM_SLUG, USERNAME],
        responses={204: None},
    ),
)
class TeamMembershipViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TeamNestedViewSet):
    serializer_class = s.MembershipSerializer
    action_serializers = {
        "create": s.MembershipSetSerializer,
        "partial_update": s.MembershipRoleSerializer,
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
        data = self.validated(s.MembershipSetSerializer)
        membership = services.membership_set(
            actor=request.user, team=self.team, user=data["username"], role=data["role"]
        )
        return self.respond(membership)

    def partial_update(self, request, *args, **kwargs):
        membership = self.get_object()
        data = self.validated(s.MembershipRoleSerializer)
        membership = services.membership_set(
            actor=request.user, team=self.team, user=membership.user, role=data["role"]
        )
        return self.respond(membership)

    def destroy(self, request, *args, **kwargs):
        membership = self.get_object()
        services.membership_remove(actor=request.user, team=self.team, user=membership.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


CLUSTER_NAME = OpenApiParameter("cluster", str, OpenApiParameter.PATH, description="Cluster name.")


@extend_schema_view(
    list=extend_schema(
        summary="The team's namespace on each cluster: in sync, or the last error",
        parameters=[TEAM_SLUG],
    ),
    retrieve=extend_schema(parameters=[TEAM_SLUG, CLUSTER_NAME]),
)
class TeamClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TeamNestedViewSet):
    serializer_class = s.TeamClusterSerializer
    action_serializers = {"delete_namespace": s.NamespaceDeleteSerializer}
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
        request=s.NamespaceDeleteSerializer,
        responses=s.TeamClusterSerializer,
    )
    @action(detail=True, methods=["post"], url_path="delete-namespace")
    def delete_namespace(self, request, team_slug=None, cluster=None):
        state = self.get_object()
        data = self.validated(s.NamespaceDeleteSerializer)
        state = services.team_namespace_delete(
            actor=request.user, team=state.team, cluster=state.cluster, confirm=data["confirm"]
        )
        return self.respond(state)


# --- clusters ----------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Clusters with capacity per GPU kind and per GPU model"),
    partial_update=extend_schema(
        summary="Change a cluster's overcommit ratio, quota mode or allowed registries (admins)",
        request=s.ClusterSettingsSerializer,
        responses=s.ClusterSerializer,
    ),
)
class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, PortalViewSet):
    serializer_class = s.ClusterSerializer
    action_serializers = {"partial_update": s.ClusterSettingsSerializer}
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
        data = self.validated(s.ClusterSettingsSerializer)
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
        return cluster


@extend_schema_view(
    list=extend_schema(
        summary="The team's queue policy on each cluster it has one on", parameters=[TEAM_SLUG]
    ),
    retrieve=extend_schema(parameters=[TEAM_SLUG, CLUSTER_NAME]),
    update=extend_schema(
        summary="Set the team's borrowing and lending limits and fair-sharing weight (admins)",
        parameters=[TEAM_SLUG, CLUSTER_NAME],
        request=s.TeamQueuePolicySetSerializer,
        responses=s.TeamQueuePolicySerializer,
    ),
)
class TeamQueuePolicyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TeamNestedViewSet):
    """How the team shares GPUs on a Kueue cluster. Without a policy a team borrows and lends
    without limit at weight 1; setting one needs no existing row (PUT creates it)."""

    serializer_class = s.TeamQueuePolicySerializer
    action_serializers = {"update": s.TeamQueuePolicySetSerializer}
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
        data = self.validated(s.TeamQueuePolicySetSerializer)
        policy = queueing.team_queue_policy_set(
            actor=request.user, team=self.team, cluster=target, **data
        )
        return self.respond(policy)


# --- quota requests ----------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Quota requests of your teams (admins: all)"),
    create=extend_schema(
        summary="Ask for GPU quota for a team you lead",
        request=s.QuotaRequestCreateSerializer,
        responses={201: s.QuotaRequestSerializer},
    ),
)
class QuotaRequestViewSet(
    RowListMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, PortalViewSet
):
    serializer_class = s.QuotaRequestSerializer
    action_serializers = {
        "create": s.QuotaRequestCreateSerializer,
        "approve": s.QuotaRequestApproveSerializer,
        "reject": s.DecisionNoteSerializer,
        "review_queue": s.ReviewQueueItemSerializer,
    }
    filterset_class = QuotaRequestFilter
    ordering_fields = ["created_at"]
    lookup_value_regex = r"\d+"
    admin_actions = {
        "approve": "approve or reject quota requests",
        "reject": "approve or reject quota requests",
        "review_queue": "see the review queue",
    }
    # Department admins too, for their departments' teams within the ceilings (``ceilings``).
    reviewer_actions = {"approve", "reject", "review_queue"}

    def get_queryset(self):
        if self.action == "review_queue":
            return selectors.review_queue_of(self.request.user)
        return selectors.quota_requests_visible_to(self.request.user)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if self.action == "review_queue":
            context["capacity"] = selectors.capacity_summaries()
            context["model_capacity"] = selectors.model_capacity_summaries()
        return context

    def create(self, request, *args, **kwargs):
        data = self.validated(s.QuotaRequestCreateSerializer)
        quota_request = quota.quota_request_create(requested_by=request.user, **data)
        return self.respond(quota_request, status_code=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Approve, optionally for fewer GPUs or a shorter period (admins; department "
        "admins within their ceiling)",
        request=s.QuotaRequestApproveSerializer,
        responses={
            201: OpenApiResponse(s.QuotaGrantSerializer, description="The grant it created."),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        quota_request = self.get_object()
        data = self.validated(s.QuotaRequestApproveSerializer)
        grant = quota.quota_request_approve(
            reviewer=request.user, quota_request=quota_request, **data
        )
        return self.respond(grant, s.QuotaGrantSerializer, status.HTTP_201_CREATED)

    @extend_schema(
        summary="Reject with a note (admins; department admins within their ceiling)",
        request=s.DecisionNoteSerializer,
        responses=s.QuotaRequestSerializer,
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        quota_request = self.get_object()
        data = self.validated(s.DecisionNoteSerializer)
        quota_request = quota.quota_request_reject(
            reviewer=request.user, quota_request=quota_request, note=data["note"]
        )
        return self.respond(quota_request)

    @extend_schema(
        summary="Withdraw a pending request (its requester or a team lead)",
        request=None,
        responses=s.QuotaRequestSerializer,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        quota_request = quota.quota_request_cancel(
            actor=request.user, quota_request=self.get_object()
        )
        return self.respond(quota_request)

    @extend_schema(
        summary="Pending requests, oldest first, with their cluster's capacity (admins; "
        "department admins: their teams', each saying whether they may decide it)",
        responses=s.ReviewQueueItemSerializer(many=True),
    )
    @action(detail=False, methods=["get"], url_path="review-queue")
    def review_queue(self, request):
        return self.list(request)


# --- quota grants ------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Quota grants of your teams (admins: all)"),
)
class QuotaGrantViewSet(RowListMixin, mixins.RetrieveModelMixin, PortalViewSet):
    serializer_class = s.QuotaGrantSerializer
    action_serializers = {
        "revoke": s.DecisionNoteSerializer,
        "shrink": s.QuotaGrantShrinkSerializer,
    }
    filterset_class = QuotaGrantFilter
    ordering_fields = ["created_at", "starts_on", "ends_on"]
    lookup_value_regex = r"\d+"
    admin_actions = {"revoke": "revoke grants", "shrink": "shrink grants"}

    def get_queryset(self):
        return selectors.quota_grants_visible_to(self.request.user)

    @extend_schema(
        summary="End an active grant now (admins)",
        request=s.DecisionNoteSerializer,
        responses=s.QuotaGrantSerializer,
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        grant = self.get_object()
        data = self.validated(s.DecisionNoteSerializer)
        grant = quota.quota_grant_revoke(actor=request.user, grant=grant, note=data["note"])
        return self.respond(grant)

    @extend_schema(
        summary="Preview what shrinking or revoking the grant would do (a dry run)",
        description="The team's quota after the change against what its running jobs and "
        "services hold now, the work that would then be over quota (the newest first until the "
        "team fits) and what happens to it. Changes nothing.",
        parameters=[
            OpenApiParameter(
                "gpus",
                int,
                OpenApiParameter.QUERY,
                required=False,
                description="The grant's GPUs after the change, at most its GPUs now; 0 (or "
                "neither parameter) previews revoking it.",
            ),
            OpenApiParameter(
                "ends_on",
                datetime.date,
                OpenApiParameter.QUERY,
                required=False,
                description="An earlier last day; one before today previews ending it now.",
            ),
        ],
        request=None,
        responses=s.GrantImpactSerializer,
    )
    @action(detail=True, methods=["get"])
    def impact(self, request, pk=None):
        grant = self.get_object()
        query = s.GrantImpactQuerySerializer(data=request.query_params, context={"grant": grant})
        query.is_valid(raise_exception=True)
        gpus, ends_on = query.validated_data.get("gpus"), query.validated_data.get("ends_on")
        today = timezone.localdate()
        after = (
            impact.gpus_after_shrink(grant=grant, gpus=gpus, ends_on=ends_on, today=today)
            if gpus is not None or ends_on is not None
            else 0
        )
        preview = impact.grant_change_impact(grant=grant, new_gpus=after, today=today)
        return self.respond(preview, s.GrantImpactSerializer)

    @extend_schema(
        summary="Reduce an active grant's GPUs or end it sooner (admins)",
        request=s.QuotaGrantShrinkSerializer,
        responses=s.QuotaGrantSerializer,
    )
    @action(detail=True, methods=["post"])
    def shrink(self, request, pk=None):
        grant = self.get_object()
        data = self.validated(s.QuotaGrantShrinkSerializer)
        grant = quota.quota_grant_shrink(actor=request.user, grant=grant, **data)
        return self.respond(grant)


# --- departments -------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Departments (admins: all; department admins: theirs)"),
    retrieve=extend_schema(
        summary="A department with its ceilings and what its teams hold against them"
    ),
    create=extend_schema(
        summary="Create a department (admins)",
        request=s.DepartmentCreateSerializer,
        responses={201: s.DepartmentDetailSerializer},
    ),
    partial_update=extend_schema(
        summary="Rename a department or move it under another (admins)",
        request=s.DepartmentWriteSerializer,
        responses=s.DepartmentDetailSerializer,
    ),
)
class DepartmentViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    PortalViewSet,
):
    serializer_class = s.DepartmentSerializer
    action_serializers = {
        "retrieve": s.DepartmentDetailSerializer,
        "create": s.DepartmentCreateSerializer,
        "partial_update": s.DepartmentWriteSerializer,
        "admins": s.DepartmentAdminsSerializer,
        "ceilings": s.DepartmentCeilingSetSerializer,
    }
    lookup_field = "slug"
    lookup_value_regex = SLUG
    ordering_fields = ["slug", "name", "created_at"]
    http_method_names = ["get", "post", "patch", "put", "head", "options"]
    admin_actions = {
        "create": "create departments",
        "partial_update": "change departments",
        "admins": "set department admins",
        "ceilings": "set department ceilings",
    }

    def get_queryset(self):
        return (
            selectors.departments_visible_to(self.request.user)
            .select_related("parent")
            .prefetch_related("admins", "teams")
        )

    def create(self, request, *args, **kwargs):
        data = self.validated(s.DepartmentCreateSerializer)
        department = departments.department_create(actor=request.user, **data)
        return self.respond(department, s.DepartmentDetailSerializer, status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        department = self.get_object()
        data = self.validated(s.DepartmentWriteSerializer)
        department = departments.department_update(
            actor=request.user, department=department, **data
        )
        return self.respond(self._fresh(department), s.DepartmentDetailSerializer)

    def _fresh(self, department: Department) -> Department:
        return self.get_queryset().get(pk=department.pk)

    @extend_schema(
        summary="Make exactly these users the department's admins (admins)",
        request=s.DepartmentAdminsSerializer,
        responses=s.DepartmentDetailSerializer,
    )
    @action(detail=True, methods=["put"])
    def admins(self, request, slug=None):
        department = self.get_object()
        data = self.validated(s.DepartmentAdminsSerializer)
        departments.department_set_admins(
            actor=request.user, department=department, admins=data["admins"]
        )
        return self.respond(self._fresh(department), s.DepartmentDetailSerializer)

    @extend_schema(
        summary="Set or remove (gpus null) the ceiling for a GPU model on a cluster (admins)",
        request=s.DepartmentCeilingSetSerializer,
        responses=s.DepartmentDetailSerializer,
    )
    @action(detail=True, methods=["put"])
    def ceilings(self, request, slug=None):
        department = self.get_object()
        data = self.validated(s.DepartmentCeilingSetSerializer)
        departments.department_set_ceiling(actor=request.user, department=department, **data)
        return self.respond(self._fresh(department), s.DepartmentDetailSerializer)


# --- audit -------------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="State changes of your teams, newest first (admins: all)"),
)
class AuditEventViewSet(RowListMixin, mixins.RetrieveModelMixin, PortalViewSet):
    serializer_class = s.AuditEventSerializer
    filterset_class = AuditEventFilter
    filter_backends = [PortalFilterBackend]  # newest first, always
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return selectors.audit_events_visible_to(self.request.user)
