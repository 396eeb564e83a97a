from django.urls import path

from webhooks import views

urlpatterns = [
    path("teams/<slug:slug>/webhooks/", views.team_webhooks, name="team-webhooks"),
    path("teams/<slug:slug>/webhooks/<int:pk>/", views.webhook_detail, name="webhook-detail"),
    path("teams/<slug:slug>/webhooks/<int:pk>/test/", views.webhook_test, name="webhook-test"),
    path(
        "teams/<slug:slug>/webhooks/<int:pk>/rotate-secret/",
        views.webhook_rotate_secret,
        name="webhook-rotate-secret",
    ),
    path(
        "teams/<slug:slug>/webhooks/<int:pk>/delete/",
        views.webhook_delete,
        name="webhook-delete",
    ),
    path(
        "teams/<slug:slug>/webhook-deliveries/<int:pk>/redeliver/",
        views.delivery_redeliver,
        name="webhook-delivery-redeliver",
    ),
]
