"""The job API under /api/v1/jobs/, and a team's queue under /api/v1/teams/{slug}/queue/
(included by portal/urls.py)."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from gpujobs.api import views

router = DefaultRouter()
router.include_root_view = False
router.include_format_suffixes = False
router.register("jobs", views.GpuJobViewSet, basename="gpu-job")

urlpatterns = [
    path("teams/<slug:team_slug>/queue/", views.TeamQueueView.as_view(), name="team-queue"),
    *router.urls,
]
