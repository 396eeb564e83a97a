"""The settings no environment variable changes: which apps and middleware run, the form
renderer, the password rules, the Content-Security-Policy, and the API's framework and schema.

``portal/settings.py`` imports each of them beside the settings it reads from the environment,
which it alone reads; ``DJANGO_SETTINGS_MODULE`` stays ``portal.settings``.
"""

from csp.constants import NONE, SELF, UNSAFE_HASHES

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "axes",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_celery_beat",
    "csp",
    "accounts",
    "clusters",
    "tenants",
    "reconcile",
    "monitoring",
    "gpujobs",
    "serving",
    "interactive",
    "billing",
    "workloads",
    "webhooks",
    "sharing",
]

MIDDLEWARE = [
    # First: the container platform's probes, /healthz and /readyz, answered before the host
    # check, the https redirect or a sign-in could turn them away (portal/health.py).
    "portal.health.HealthCheckMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "core.middleware.RefuseUntextualInput",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: answers 429 to a sign-in attempt once its client is locked out (accounts.lockout).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django's renderer, but the common widgets written in Python rather than a template each
# (core/form_rendering.py): pages of forms spent most of their time rendering widgets.
FORM_RENDERER = "core.form_rendering.PythonWidgetRenderer"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Content-Security-Policy (django-csp): every script, style, font and request comes from the
# portal itself, and no page runs inline script or eval (so an injected <script> or onclick=
# does nothing). Plotly figures are data in <script type="application/json"> blocks, which a
# policy does not restrict; htmx is told not to inject its indicator styles or eval anything
# (templates/base.html). Images may also be data: URIs (plotly's and Swagger UI's icons).
# No inline style either, but for the three that plotly.js writes, allowed by their hashes
# (tests/unit/test_content_security_policy.py recomputes them from the plotly.js served):
PLOTLY_INLINE_STYLES = [
    # Empty: the <style> elements plotly then fills through the CSSOM, and the style="" it sets.
    "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",
    # The stylesheet of the map library plotly.js bundles, added once at load.
    "'sha256-ji27qzEtxXZW+7dun6UwjHXJ18e6WAin1VvNtkzIE/o='",
    # style="image-rendering: ..." on heatmap images.
    "'sha256-AR/cKIZjWPcPmBUPDA6oti9XBiTbJvz0Cro2J1VzzS8='",
]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        # 'unsafe-hashes' lets the hashes match style attributes too, never any other value.
        "style-src": [SELF, UNSAFE_HASHES, *PLOTLY_INLINE_STYLES],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON, forms and multipart as DRF parses them, refusing strings that are not text.
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.TextJSONParser",
        "core.parsers.TextFormParser",
        "core.parsers.TextMultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "portal.api.PortalPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "tenants.api.filters.PortalFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "core.openapi.PortalAutoSchema",
    "EXCEPTION_HANDLER": "portal.api.exception_handler",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.negotiation.PortalContentNegotiation",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "Teams, GPU quota requests, grants and their audit trail.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema (and its docs page, portal/urls.py) are for signed-in users only.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "QuotaRequestStateEnum": "tenants.models.QuotaRequest.State",
        "QuotaGrantStateEnum": "tenants.models.QuotaGrant.State",
        "MembershipRoleEnum": "tenants.models.Membership.Role",
        "AuditActionEnum": "tenants.models.AuditEvent.Action",
        "GpuJobStateEnum": "gpujobs.models.GpuJob.State",
        "GpuJobPriorityEnum": "gpujobs.models.GpuJob.Priority",
        "ProbeEnum": "serving.models.Revision.Probe",
        "LayoutKindEnum": "sharing.models.LayoutRequest.Kind",
        "LayoutStateEnum": "sharing.models.LayoutRequest.State",
    },
}
