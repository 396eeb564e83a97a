"""The REST API under /api/v1/ (included by portal/urls.py)."""

from django.urls import path
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.routers import DefaultRouter
from rest_framework.settings import api_settings

from tenants.api import views

router = DefaultRouter()
router.include_format_suffixes = False
router.register("teams", views.TeamViewSet, basename="team")
router.register(
    r"teams/(?P<team_slug>[^/.]+)/members", views.TeamMembershipViewSet, basename="team-member"
)
router.register(
    r"teams/(?P<team_slug>[^/.]+)/clusters", views.TeamClusterViewSet, basename="team-cluster"
)
router.register(
    r"teams/(?P<team_slug>[^/.]+)/queue-policies",
    views.TeamQueuePolicyViewSet,
    basename="team-queue-policy",
)
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("quota-requests", views.QuotaRequestViewSet, basename="quota-request")
router.register("quota-grants", views.QuotaGrantViewSet, basename="quota-grant")
router.register("audit-events", views.AuditEventViewSet, basename="audit-event")

urlpatterns = [
    path(
        "auth/token/",
        # DRF's view names its own parsers; the API's refuse what is not text.
        ObtainAuthToken.as_view(parser_classes=api_settings.DEFAULT_PARSER_CLASSES),
        name="api-token",
    ),
    path("me/", views.MeView.as_view(), name="api-me"),
    *router.urls,
]
