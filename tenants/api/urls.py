"""The REST API under /api/v1/ (included by portal/urls.py)."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from tenants.api import bookings
from tenants.api.views import (
    audit,
    clusters,
    departments,
    me,
    members,
    queue_policies,
    quota_grants,
    quota_requests,
    teams,
)
from tenants.api.views.base import SLUG

router = DefaultRouter()
router.include_format_suffixes = False
router.register("teams", teams.TeamViewSet, basename="team")
router.register(
    rf"teams/(?P<team_slug>{SLUG})/members",
    members.TeamMembershipViewSet,
    basename="team-member",
)
router.register(
    rf"teams/(?P<team_slug>{SLUG})/clusters",
    teams.TeamClusterViewSet,
    basename="team-cluster",
)
router.register(
    rf"teams/(?P<team_slug>{SLUG})/queue-policies",
    queue_policies.TeamQueuePolicyViewSet,
    basename="team-queue-policy",
)
router.register("clusters", clusters.ClusterViewSet, basename="cluster")
router.register("departments", departments.DepartmentViewSet, basename="department")
router.register("quota-requests", quota_requests.QuotaRequestViewSet, basename="quota-request")
router.register("quota-grants", quota_grants.QuotaGrantViewSet, basename="quota-grant")
router.register("audit-events", audit.AuditEventViewSet, basename="audit-event")

urlpatterns = [
    path("me/", me.MeView.as_view(), name="api-me"),
    path(
        "clusters/<slug:name>/calendar/",
        bookings.ClusterCalendarView.as_view(),
        name="api-cluster-calendar",
    ),
    path(
        "clusters/<slug:name>/earliest-window/",
        bookings.EarliestWindowView.as_view(),
        name="api-cluster-earliest-window",
    ),
    *router.urls,
]
