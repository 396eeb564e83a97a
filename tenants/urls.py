from django.urls import path

from tenants.views import audit, clusters, departments, grants, home, quota_requests, review, teams

urlpatterns = [
    path("", home.home, name="home"),
    path("teams/<slug:slug>/", teams.team_detail, name="team-detail"),
    path(
        "teams/<slug:slug>/requests/new/",
        quota_requests.quota_request_new,
        name="quota-request-new",
    ),
    path("teams/<slug:slug>/archive/", teams.team_archive, name="team-archive"),
    path(
        "teams/<slug:slug>/clusters/<slug:cluster>/delete-namespace/",
        teams.team_namespace_delete,
        name="team-namespace-delete",
    ),
    path(
        "teams/<slug:slug>/clusters/<slug:cluster>/queue-policy/",
        teams.team_queue_policy,
        name="team-queue-policy",
    ),
    path("clusters/<slug:name>/queueing/", clusters.cluster_queueing, name="cluster-queueing"),
    path(
        "requests/<int:pk>/cancel/",
        quota_requests.quota_request_cancel,
        name="quota-request-cancel",
    ),
    path("requests/<int:pk>/approve/", review.quota_request_approve, name="quota-request-approve"),
    path("requests/<int:pk>/reject/", review.quota_request_reject, name="quota-request-reject"),
    path("review/", review.review_queue, name="review-queue"),
    path("review/decide/", review.review_decide, name="review-decide"),
    path("grants/<int:pk>/", grants.grant_detail, name="grant-detail"),
    path("grants/<int:pk>/revoke/", grants.grant_revoke, name="grant-revoke"),
    path("grants/<int:pk>/shrink/", grants.grant_shrink, name="grant-shrink"),
    path("audit/", audit.audit_list, name="audit-list"),
    path("departments/", departments.department_list, name="department-list"),
    path("departments/<slug:slug>/", departments.department_detail, name="department-detail"),
]
