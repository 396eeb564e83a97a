from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("oidc/", include("accounts.oidc_urls")),
    path("django-admin/", admin.site.urls),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # A page: anonymous visitors are sent to sign in. The split view serves Swagger UI's start-up
    # script as a file of its own (?script), so the page needs no inline script.
    path(
        "api/v1/docs/",
        login_required(
            SpectacularSwaggerSplitView.as_view(
                url_name="api-schema", template_name="api_docs.html"
            )
        ),
        name="api-docs",
    ),
    path("api/v1/", include("accounts.api.urls")),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("gpujobs.api.urls")),
    path("api/v1/", include("serving.api.urls")),
    path("api/v1/", include("interactive.api.urls")),
    path("api/v1/", include("monitoring.api.urls")),
    path("api/v1/", include("billing.api.urls")),
    path("api/v1/", include("webhooks.api.urls")),
    path("api/v1/", include("sharing.api.urls")),
    path("api/v1/", include("workloads.api.urls")),
    path("monitoring/", include("monitoring.urls")),
    path("billing/", include("billing.urls")),
    path("jobs/", include("gpujobs.urls")),
    path("account/", include("accounts.urls")),
    path("services/", include("serving.urls")),
    path("interactive/", include("interactive.urls")),
    path("sharing/", include("sharing.urls")),
    path("", include("webhooks.urls")),
    path("", include("workloads.urls")),
    path("", include("tenants.urls")),
]

handler400 = "portal.api.bad_request"
handler404 = "portal.api.not_found"
