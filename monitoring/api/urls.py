"""Monitoring's part of the REST API under /api/v1/ (included by portal/urls.py)."""

from django.urls import path

from monitoring.api import views

urlpatterns = [
    path(
        "monitoring/teams/<slug:slug>/utilisation/",
        views.TeamUtilisationView.as_view(),
        name="api-team-utilisation",
    ),
    path("monitoring/teams/<slug:slug>/pods/", views.TeamPodsView.as_view(), name="api-team-pods"),
    path("usage-report/", views.UsageReportView.as_view(), name="api-usage-report"),
    path("notifications/", views.NotificationListView.as_view(), name="api-notifications"),
    path(
        "notifications/read/",
        views.NotificationsReadView.as_view(),
        name="api-notifications-read",
    ),
]
