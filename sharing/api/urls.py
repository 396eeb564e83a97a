"""Sharing layouts in the REST API under /api/v1/ (included by portal/urls.py)."""

from rest_framework.routers import SimpleRouter

from sharing.api import views

router = SimpleRouter()
router.register("sharing-layouts", views.LayoutViewSet, basename="sharing-layout")

urlpatterns = router.urls
