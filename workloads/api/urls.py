"""Member limits in the REST API under /api/v1/ (included by portal/urls.py)."""

from rest_framework.routers import SimpleRouter

from tenants.api.views.base import SLUG
from workloads.api import member_limits

router = SimpleRouter()
router.register(
    rf"teams/(?P<team_slug>{SLUG})/member-limits",
    member_limits.MemberLimitViewSet,
    basename="team-member-limit",
)

urlpatterns = router.urls
