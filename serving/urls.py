from django.urls import path

from serving import views

urlpatterns = [
    path("", views.service_list, name="service-list"),
    path("new/", views.service_new, name="service-new"),
    path("<int:pk>/", views.service_detail, name="service-detail"),
    path("<int:pk>/live/", views.service_live, name="service-live"),
    path("<int:pk>/logs/", views.service_logs, name="service-logs"),
    path("<int:pk>/events/", views.service_events, name="service-events"),
    path("<int:pk>/gpus/", views.service_gpus, name="service-gpus"),
    path("<int:pk>/revisions/", views.service_revision, name="service-revision"),
    path("<int:pk>/traffic/", views.service_traffic, name="service-traffic"),
    path("<int:pk>/promote/", views.service_promote, name="service-promote"),
    path("<int:pk>/rollback/", views.service_rollback, name="service-rollback"),
    path("<int:pk>/scale/", views.service_scale, name="service-scale"),
    path("<int:pk>/stop/", views.service_stop, name="service-stop"),
    path("<int:pk>/delete/", views.service_delete, name="service-delete"),
]
