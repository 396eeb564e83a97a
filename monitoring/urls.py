from django.urls import path

from monitoring import booking_views, views

urlpatterns = [
    path("teams/<slug:slug>/", views.team_monitoring, name="monitoring-team"),
    path("teams/<slug:slug>/pods/<str:pod>/", views.pod_monitoring, name="monitoring-pod"),
    path("teams/<slug:slug>/idle-policy/", views.idle_policy_update, name="monitoring-idle-policy"),
    path("teams/<slug:slug>/alert-rules/", views.team_alert_rules, name="monitoring-team-rules"),
    path("clusters/", views.cluster_list, name="monitoring-clusters"),
    path("clusters/<slug:name>/", views.cluster_monitoring, name="monitoring-cluster"),
    path(
        "clusters/<slug:name>/alert-rules/",
        views.cluster_alert_rules,
        name="monitoring-cluster-rules",
    ),
    path("calendar/", booking_views.booking_calendar, name="booking-calendar"),
    path("usage/", views.usage_report, name="usage-report"),
    path("usage.csv", views.usage_report_csv, name="usage-report-csv"),
    path("notifications/", views.notification_list, name="notification-list"),
    path("notifications/read/", views.notifications_read, name="notifications-read"),
]
