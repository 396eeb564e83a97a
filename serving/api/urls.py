"""The service API under /api/v1/services/ (included by portal/urls.py)."""

from rest_framework.routers import DefaultRouter

from serving.api import views

router = DefaultRouter()
router.include_root_view = False
router.include_format_suffixes = False
router.register("services", views.InferenceServiceViewSet, basename="inference-service")

urlpatterns = router.urls
