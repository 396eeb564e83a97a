from django.urls import path

from tenants import views

urlpatterns = [
    path("", views.home, name="home"),
    path("teams/<slug:slug>/", views.team_detail, name="team-detail"),
    path("teams/<slug:slug>/requests/new/", views.quota_request_new, name="quota-request-new"),
    path("teams/<slug:slug>/archive/", views.team_archive, name="team-archive"),
    path(
        "teams/<slug:slug>/clusters/<slug:cluster>/delete-namespace/",
        views.team_namespace_delete,
        name="team-namespace-delete",
    ),
    path(
        "teams/<slug:slug>/clusters/<slug:cluster>/queue-policy/",
        views.team_queue_policy,
        name="team-queue-policy",
    ),
    path("clusters/<slug:name>/queueing/", views.cluster_queueing, name="cluster-queueing"),
    path("requests/<int:pk>/cancel/", views.quota_request_cancel, name="quota-request-cancel"),
    path("requests/<int:pk>/approve/", views.quota_request_approve, name="quota-request-approve"),
    path("requests/<int:pk>/reject/", views.quota_request_reject, name="quota-request-reject"),
    path("review/", views.review_queue, name="review-queue"),
    path("grants/<int:pk>/", views.grant_detail, name="grant-detail"),
    path("grants/<int:pk>/revoke/", views.grant_revoke, name="grant-revoke"),
    path("grants/<int:pk>/shrink/", views.grant_shrink, name="grant-shrink"),
    path("audit/", views.audit_list, name="audit-list"),
]
