from django.urls import path

from gpujobs import views

urlpatterns = [
    path("", views.job_list, name="gpujob-list"),
    path("new/", views.job_new, name="gpujob-new"),
    path("<int:pk>/", views.job_detail, name="gpujob-detail"),
    path("<int:pk>/live/", views.job_live, name="gpujob-live"),
    path("<int:pk>/logs/", views.job_logs, name="gpujob-logs"),
    path("<int:pk>/events/", views.job_events, name="gpujob-events"),
    path("<int:pk>/gpus/", views.job_gpus, name="gpujob-gpus"),
    path("<int:pk>/cancel/", views.job_cancel, name="gpujob-cancel"),
]
