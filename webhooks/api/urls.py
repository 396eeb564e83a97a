"""The webhooks' part of the REST API under /api/v1/ (included by portal/urls.py)."""

from rest_framework.routers import SimpleRouter

from tenants.api.views.base import SLUG
from webhooks.api import views

router = SimpleRouter()
router.register(
    rf"teams/(?P<team_slug>{SLUG})/webhooks", views.WebhookViewSet, basename="team-webhook"
)
router.register(
    rf"teams/(?P<team_slug>{SLUG})/webhook-deliveries",
    views.DeliveryViewSet,
    basename="team-webhook-delivery",
)

urlpatterns = router.urls
