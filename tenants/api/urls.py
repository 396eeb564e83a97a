"""The REST API under /api/v1/ (included by portal/urls.py)."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from tenants.api import bookings, views

router = DefaultRouter()
router.include_format_suffixes = False
router.register("teams", views.TeamViewSet, basename="team")
router.register(
    rf"teams/(?P<team_slug>{views.SLUG})/members",
    views.TeamMembershipViewSet,
    basename="team-member",
)
router.register(
    rf"teams/(?P<team_slug>{views.SLUG})/clusters",
    views.TeamClusterViewSet,
    basename="team-cluster",
)
router.register(
    rf"teams/(?P<team_slug>{views.SLUG})/queue-policies",
    views.TeamQueuePolicyViewSet,
    basename="team-queue-policy",
)
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("departments", views.DepartmentViewSet, basename="department")
router.register("quota-requests", views.QuotaRequestViewSet, basename="quota-request")
router.register("quota-grants", views.QuotaGrantViewSet, basename="quota-grant")
router.register("audit-events", views.AuditEventViewSet, basename="audit-event")

urlpatterns = [
    path("me/", views.MeView.as_view(), name="api-me"),
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
