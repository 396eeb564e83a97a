"""Settings for the GPU portal, read from the environment in this one place.

Every value has a safe default for the demo (SQLite, a local Redis, DEBUG on). Production and the
test suite override through environment variables; secrets may come from ``NAME_FILE`` paths.
"""

from pathlib import Path

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

from portal.env import env, env_bool, env_float, env_int, env_list, refuse_renamed

BASE_DIR = Path(__file__).resolve().parent.parent

# Every variable is named after the setting it sets: Django's own settings with a DJANGO_ prefix
# (DJANGO_DEBUG sets DEBUG), the portal's and Celery's as they are (PORTAL_*, GPUJOBS_*,
# MONITORING_*, CELERY_*). DATABASE_URL is the one exception, the name every tool knows.
# Portal variables renamed to follow that rule: set under the old name, a value would be ignored.
refuse_renamed(
    {
        "PORTAL_AUTHENTICATION_BACKENDS": "DJANGO_AUTHENTICATION_BACKENDS",
        "PORTAL_LOGIN_URL": "DJANGO_LOGIN_URL",
        "PORTAL_CONTAINER_CPU_REQUEST_M": "PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES",
        "PORTAL_CONTAINER_CPU_LIMIT_M": "PORTAL_CONTAINER_DEFAULT_CPU_LIMIT_MILLICORES",
        "PORTAL_CONTAINER_MEMORY_REQUEST_MI": "PORTAL_CONTAINER_DEFAULT_MEMORY_REQUEST_MIB",
        "PORTAL_CONTAINER_MEMORY_LIMIT_MI": "PORTAL_CONTAINER_DEFAULT_MEMORY_LIMIT_MIB",
        "CELERY_VISIBILITY_TIMEOUT": "CELERY_BROKER_TRANSPORT_OPTIONS_VISIBILITY_TIMEOUT",
        "CELERY_UNACKED_RESTORE_INTERVAL": (
            "CELERY_BROKER_TRANSPORT_OPTIONS_UNACKED_RESTORE_INTERVAL"
        ),
    }
)

DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = env("DJANGO_SECRET_KEY", "demo-only-insecure-secret-key-change-me" if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "Set DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) when DEBUG is off"
    )
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

PORTAL_NAME = env("PORTAL_NAME", "gpu-portal")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_celery_beat",
    "clusters",
    "tenants",
    "monitoring",
    "gpujobs",
    "serving",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "portal.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.portal",
                "monitoring.context_processors.notifications",
            ],
        },
    },
]

WSGI_APPLICATION = "portal.wsgi.application"

# SQLite is the embedded default for the demo; tests and docker compose use PostgreSQL.
DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo's web server, worker, beat and watcher all write to this one file. WAL lets
    # readers go on beside the one writer; the busy timeout makes a writer wait for the lock
    # rather than fail; IMMEDIATE transactions take the write lock at BEGIN, because SQLite
    # refuses at once ("database is locked", whatever the timeout) a transaction that read
    # first and then wants to write while another connection writes.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        **DATABASES["default"].get("OPTIONS", {}),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Sign-in. Username/password today; single sign-on (e.g. an OIDC backend) is added by listing its
# backend here and pointing LOGIN_URL at its start view: no view checks how a user signed in.
AUTHENTICATION_BACKENDS = env_list(
    "DJANGO_AUTHENTICATION_BACKENDS", "django.contrib.auth.backends.ModelBackend"
)
LOGIN_URL = env("DJANGO_LOGIN_URL", "login")
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("DJANGO_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # plotly.js as the plotly package ships it (static/plotly/plotly.min.js): served by the
    # portal itself, never from a CDN, and always the version the figures are built for.
    ("plotly", Path(plotly.__file__).resolve().parent / "package_data"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.PortalPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "portal.openapi.PortalAutoSchema",
    "EXCEPTION_HANDLER": "portal.api.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "Teams, GPU quota requests, grants and their audit trail.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "QuotaRequestStateEnum": "tenants.models.QuotaRequest.State",
        "QuotaGrantStateEnum": "tenants.models.QuotaGrant.State",
        "MembershipRoleEnum": "tenants.models.Membership.Role",
        "AuditActionEnum": "tenants.models.AuditEvent.Action",
        "ProbeEnum": "serving.models.Revision.Probe",
    },
}

CELERY_BROKER_URL = env("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", "") or None
# Publishing must fail fast when Redis is down: the request that enqueues is a person waiting.
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Redis delivers a message again when the worker that took it never acknowledged it (it died
# mid-task) after this many seconds. It must exceed the longest retry countdown.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_BROKER_TRANSPORT_OPTIONS_VISIBILITY_TIMEOUT", 3600),
    "unacked_restore_interval": env_int(
        "CELERY_BROKER_TRANSPORT_OPTIONS_UNACKED_RESTORE_INTERVAL", 10
    ),
}
# How often beat runs each periodic task below, in seconds.
PORTAL_RECONCILE_SWEEP_SECONDS = env_float("PORTAL_RECONCILE_SWEEP_SECONDS", 300)
PORTAL_INVENTORY_SYNC_SECONDS = env_float("PORTAL_INVENTORY_SYNC_SECONDS", 60)
PORTAL_IDLE_CHECK_EVERY_SECONDS = env_float("PORTAL_IDLE_CHECK_EVERY_SECONDS", 60)
GPUJOBS_RESYNC_SECONDS = env_float("GPUJOBS_RESYNC_SECONDS", 60)
SERVING_RESYNC_SECONDS = env_float("SERVING_RESYNC_SECONDS", 60)
CELERY_BEAT_SCHEDULE = {
    # Expires grants whose period is over, then reconciles every team on every cluster: repairs
    # hand edits and shrinks the quotas of expired grants.
    "reconcile-sweep": {
        "task": "tenants.tasks.reconcile_sweep",
        "schedule": PORTAL_RECONCILE_SWEEP_SECONDS,
    },
    # GPU capacity from the clusters' Ready GPU nodes.
    "sync-gpu-inventory": {
        "task": "clusters.tasks.sync_all_inventories",
        "schedule": PORTAL_INVENTORY_SYNC_SECONDS,
    },
    "check-idle-gpus": {
        "task": "monitoring.tasks.check_idle_gpus",
        "schedule": PORTAL_IDLE_CHECK_EVERY_SECONDS,
    },
    # GPU jobs: re-enqueue queued jobs nobody is creating; bring active jobs in line with their
    # clusters from full lists (whatever the watcher missed).
    "resync-gpu-jobs": {
        "task": "gpujobs.tasks.resync_jobs",
        "schedule": GPUJOBS_RESYNC_SECONDS,
    },
    # Inference services: reconcile every one (repairs hand edits, finishes deletions), and
    # bring their revisions' states in line from full lists (whatever the watcher missed).
    "reconcile-services": {
        "task": "serving.tasks.reconcile_services",
        "schedule": PORTAL_RECONCILE_SWEEP_SECONDS,
    },
    "resync-services": {
        "task": "serving.tasks.resync_services",
        "schedule": SERVING_RESYNC_SECONDS,
    },
}

# Monitoring: one Prometheus call may take MONITORING_PROMETHEUS_TIMEOUT seconds; answers are
# reused for MONITORING_CACHE_SECONDS (in the cache below); charts refresh themselves every
# MONITORING_REFRESH_SECONDS; usage reports sample GPUs every MONITORING_USAGE_RESOLUTION_SECONDS.
MONITORING_PROMETHEUS_TIMEOUT = env_float("MONITORING_PROMETHEUS_TIMEOUT", 10)
MONITORING_CACHE_SECONDS = env_float("MONITORING_CACHE_SECONDS", 15)
MONITORING_REFRESH_SECONDS = env_int("MONITORING_REFRESH_SECONDS", 30)
MONITORING_USAGE_RESOLUTION_SECONDS = env_int("MONITORING_USAGE_RESOLUTION_SECONDS", 60)
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "portal"}
}

# E-mail (idle-GPU notifications) goes out only when a mail server is configured.
EMAIL_BACKEND = env("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("DJANGO_EMAIL_HOST", "")
EMAIL_PORT = env_int("DJANGO_EMAIL_PORT", 25)
EMAIL_HOST_USER = env("DJANGO_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("DJANGO_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("DJANGO_EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env("DJANGO_DEFAULT_FROM_EMAIL", f"{PORTAL_NAME}@localhost")
# Where e-mails link to.
PORTAL_BASE_URL = env("PORTAL_BASE_URL", "http://127.0.0.1:8000")

# Upper bound on one request's GPUs: anything above it is a typo, not a plan.
PORTAL_MAX_GPUS_PER_REQUEST = env_int("PORTAL_MAX_GPUS_PER_REQUEST", 1024)

# Reconcile: transient cluster errors are retried with exponential backoff up to this many
# seconds between tries, this many times; after that the periodic sweep takes over.
PORTAL_RECONCILE_RETRY_BACKOFF_MAX = env_int("PORTAL_RECONCILE_RETRY_BACKOFF_MAX", 60)
PORTAL_RECONCILE_MAX_RETRIES = env_int("PORTAL_RECONCILE_MAX_RETRIES", 10)
# What every team namespace gets besides its grants: a pod count, and container defaults (so
# pods fit a quota that counts CPU and memory without saying what they need).
PORTAL_TEAM_MAX_PODS = env_int("PORTAL_TEAM_MAX_PODS", 100)
PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES = env_int(
    "PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES", 100
)
PORTAL_CONTAINER_DEFAULT_CPU_LIMIT_MILLICORES = env_int(
    "PORTAL_CONTAINER_DEFAULT_CPU_LIMIT_MILLICORES", 1000
)
PORTAL_CONTAINER_DEFAULT_MEMORY_REQUEST_MIB = env_int(
    "PORTAL_CONTAINER_DEFAULT_MEMORY_REQUEST_MIB", 256
)
PORTAL_CONTAINER_DEFAULT_MEMORY_LIMIT_MIB = env_int(
    "PORTAL_CONTAINER_DEFAULT_MEMORY_LIMIT_MIB", 1024
)

# GPU jobs: the run time a job gets when it names none; how long a finished Job (and its pods and
# logs) stays on the cluster; how long a worker's claim on a queued job lasts before another may
# take it; after how long the resync enqueues a queued job again; how often job pages refresh.
GPUJOBS_DEFAULT_MAX_RUNTIME_SECONDS = env_int("GPUJOBS_DEFAULT_MAX_RUNTIME_SECONDS", 86400)
GPUJOBS_TTL_SECONDS_AFTER_FINISHED = env_int("GPUJOBS_TTL_SECONDS_AFTER_FINISHED", 86400)
GPUJOBS_CLAIM_SECONDS = env_int("GPUJOBS_CLAIM_SECONDS", 60)
GPUJOBS_REQUEUE_AFTER_SECONDS = env_int("GPUJOBS_REQUEUE_AFTER_SECONDS", 30)
GPUJOBS_REFRESH_SECONDS = env_int("GPUJOBS_REFRESH_SECONDS", 2)
GPUJOBS_LOG_FOLLOW_MAX_SECONDS = env_int("GPUJOBS_LOG_FOLLOW_MAX_SECONDS", 600)
# What the watcher process (``manage.py watch_jobs``) follows: one ``run`` per workload app.
PORTAL_WATCHERS = ["gpujobs.watcher.run", "serving.watcher.run"]

# Inference services: the Gateway (``namespace/name``) their HTTPRoutes attach to on clusters
# with the Gateway API (empty: routes name no parent, for a gateway controller that adopts
# them, or to be attached by hand); how often service pages refresh.
SERVING_GATEWAY = env("SERVING_GATEWAY", "")
SERVING_REFRESH_SECONDS = env_int("SERVING_REFRESH_SECONDS", 2)

PORTAL_LOG_LEVEL = env("PORTAL_LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": PORTAL_LOG_LEVEL},
}
