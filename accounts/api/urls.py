"""The token API under /api/v1/ (included by portal/urls.py)."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from accounts.api import views

router = DefaultRouter()
router.include_root_view = False
router.include_format_suffixes = False
router.register("tokens", views.ApiTokenViewSet, basename="token")

urlpatterns = [
    path("auth/token/", views.TokenLoginView.as_view(), name="api-token"),
    *router.urls,
]
