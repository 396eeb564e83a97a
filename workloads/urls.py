from django.urls import path

from workloads import member_limit_views

urlpatterns = [
    path(
        "teams/<slug:slug>/member-limits/",
        member_limit_views.member_limit_set,
        name="member-limit-set",
    ),
    path(
        "teams/<slug:slug>/member-limits/<int:pk>/remove/",
        member_limit_views.member_limit_remove,
        name="member-limit-remove",
    ),
]
