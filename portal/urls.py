from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("django-admin/", admin.site.urls),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include("tenants.api.urls")),
    path("api/v1/", include("gpujobs.api.urls")),
    path("api/v1/", include("serving.api.urls")),
    path("api/v1/", include("monitoring.api.urls")),
    path("monitoring/", include("monitoring.urls")),
    path("jobs/", include("gpujobs.urls")),
    path("services/", include("serving.urls")),
    path("", include("tenants.urls")),
]
