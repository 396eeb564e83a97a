from django.urls import path

from accounts import views

urlpatterns = [
    path("tokens/", views.api_tokens, name="api-tokens"),
    path("tokens/<int:pk>/revoke/", views.api_token_revoke, name="api-token-revoke"),
]
