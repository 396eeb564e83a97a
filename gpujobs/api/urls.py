"""The job API under /api/v1/jobs/, and a team's queue and fair share of idle GPUs under
/api/v1/teams/{slug}/queue/ and /fair-share/ (included by portal/urls.py)."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from gpujobs.api import fair_share, views

router = DefaultRouter()
router.include_root_view = False
router.include_format_suffixes = False
router.register("jobs", views.GpuJobViewSet, basename="gpu-job")

urlpatterns = [
    path("teams/<slug:team_slug>/queue/", views.TeamQueueView.as_view(), name="team-queue"),
    path(
        "teams/<slug:team_slug>/fair-share/",
        fair_share.TeamFairShareView.as_view(),
        name="team-fair-share",
    ),
    *router.urls,
]
