"""The job API under /api/v1/jobs/ (included by portal/urls.py)."""

from rest_framework.routers import DefaultRouter

from gpujobs.api import views

router = DefaultRouter()
router.include_root_view = False
router.include_format_suffixes = False
router.register("jobs", views.GpuJobViewSet, basename="gpu-job")

urlpatterns = router.urls
