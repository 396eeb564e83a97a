"""The session API under /api/v1/sessions/ (included by portal/urls.py)."""

from rest_framework.routers import DefaultRouter

from interactive.api import views

router = DefaultRouter()
router.include_root_view = False
router.include_format_suffixes = False
router.register("sessions", views.SessionViewSet, basename="session")

urlpatterns = router.urls
