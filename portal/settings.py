"""Settings for the GPU portal, read from the environment in this one place.

Every value has a safe default for the demo (SQLite, a local Redis, DEBUG on). Production and the
test suite override through environment variables; secrets may come from ``NAME_FILE`` paths.
The settings no variable changes are in ``portal/fixed_settings.py``, imported here.
"""

import datetime
from pathlib import Path

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

from portal.env import env, env_bool, env_float, env_int, env_json, env_list, refuse_renamed

# The settings no variable changes: the apps, the middleware, the API's framework and schema, the
# Content-Security-Policy (portal/fixed_settings.py).
from portal.fixed_settings import (  # noqa: F401 (settings: Django reads them from this module)
    AUTH_PASSWORD_VALIDATORS,
    CONTENT_SECURITY_POLICY,
    DEFAULT_AUTO_FIELD,
    FORM_RENDERER,
    INSTALLED_APPS,
    MIDDLEWARE,
    PLOTLY_INLINE_STYLES,
    REST_FRAMEWORK,
    ROOT_URLCONF,
    SPECTACULAR_SETTINGS,
    WSGI_APPLICATION,
)

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

# HTTPS. With DEBUG off the portal assumes it is served over HTTPS by a TLS-terminating proxy in
# front, which says so in X-Forwarded-Proto: plain http is redirected, cookies are sent over
# HTTPS only, and browsers are told to use HTTPS for a year (HSTS). Every one can be switched
# off (for a deployment without TLS, e.g. behind a proxy on a private network, or while trying
# HSTS with a short max-age first); the demo (DEBUG on) has them all off.
# DJANGO_SECURE_PROXY_SSL_HEADER names the header ("none": trust no header). Only a proxy that
# sets that header on every request (dropping the client's own) may be trusted with it.
_proxy_ssl_header = env("DJANGO_SECURE_PROXY_SSL_HEADER", "none" if DEBUG else "X-Forwarded-Proto")
SECURE_PROXY_SSL_HEADER = (
    None
    if _proxy_ssl_header.lower() == "none"
    else ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https")
)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0 if DEBUG else 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", not DEBUG)

PORTAL_NAME = env("PORTAL_NAME", "gpu-portal")
# The namespace the portal's own pods run in (deploy/namespace.yaml): never a team's.
PORTAL_NAMESPACE = env("PORTAL_NAMESPACE", "gpu-portal")
# A file whose text every page shows at its top as a notice (portal/notice.py), read at each
# request: a notice comes and goes with the file, without a restart. Unset, or no file, no
# notice. The demo says there how far the build of its cluster is.
PORTAL_NOTICE_FILE = env("PORTAL_NOTICE_FILE")

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

# SQLite is the embedded default for the demo; tests and docker compose use PostgreSQL.
# Connections are closed at the end of each request (DJANGO_CONN_MAX_AGE=0): under the ASGI
# worker every request runs its database work in a thread of its own, whose persistent
# connection would outlive it unused. With DJANGO_DB_POOL_MAX_SIZE (the image sets it) each
# process keeps a pool of PostgreSQL connections (psycopg_pool) and "closing" one gives it back:
# a request no longer pays a connect (a PostgreSQL backend started and authenticated) each time.
DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DJANGO_CONN_MAX_AGE", 0),
        # A kept connection is checked before a request or task reuses it: after the database
        # restarted, the first request of each web worker would otherwise be a 500.
        conn_health_checks=True,
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
DB_POOL_MAX_SIZE = env_int("DJANGO_DB_POOL_MAX_SIZE", 0)
if DB_POOL_MAX_SIZE > 0 and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    if DATABASES["default"]["CONN_MAX_AGE"]:
        raise ImproperlyConfigured(
            "DJANGO_DB_POOL_MAX_SIZE and DJANGO_CONN_MAX_AGE: set one of them, not both (a "
            "pooled connection goes back to the pool after each request)."
        )
    # With conn_health_checks (above) the pool checks each connection it hands out: after the
    # database restarted, a dead one is replaced rather than failing a request.
    DATABASES["default"]["OPTIONS"] = {
        "pool": {
            "min_size": min(2, DB_POOL_MAX_SIZE),
            "max_size": DB_POOL_MAX_SIZE,
            # A thread that finds every connection taken waits this long, then fails rather
            # than hanging.
            "timeout": env_float("DJANGO_DB_POOL_TIMEOUT", 10.0),
        },
        **DATABASES["default"].get("OPTIONS", {}),
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # No JIT: PostgreSQL compiles any query whose estimated cost passes jit_above_cost, and
    # the review queue's per-request subqueries do; it spent over a second compiling a page
    # that ran in 25 ms. The portal's queries are short: compiling never pays.
    DATABASES["default"]["OPTIONS"] = {
        "options": "-c jit=off",
        **DATABASES["default"].get("OPTIONS", {}),
    }

# Sign-in. Username/password today; single sign-on (e.g. an OIDC backend) is added by listing its
# backend here and pointing LOGIN_URL at its start view: no view checks how a user signed in.
# axes' backend goes first whatever the list: it refuses every attempt of a locked-out client.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    *env_list("DJANGO_AUTHENTICATION_BACKENDS", "django.contrib.auth.backends.ModelBackend"),
]
LOGIN_URL = env("DJANGO_LOGIN_URL", "login")
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on through an OpenID Connect provider (mozilla-django-oidc), off unless
# OIDC_ENABLED. On, the sign-in page offers "Sign in with OIDC_PROVIDER_NAME" beside the
# username/password form, which stays for break-glass admins (an account with a password is never
# taken over by a provider's user of the same name). The provider's endpoints are named one by
# one (its discovery document lists them: .well-known/openid-configuration). The client is
# confidential, uses the authorization-code flow with PKCE and RS256-signed ID tokens.
OIDC_ENABLED = env_bool("OIDC_ENABLED", False)
OIDC_PROVIDER_NAME = env("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_RP_CLIENT_ID = env("OIDC_RP_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env("OIDC_RP_CLIENT_SECRET")
OIDC_RP_SIGN_ALGO = env("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env("OIDC_RP_SCOPES", "openid email profile")
OIDC_OP_AUTHORIZATION_ENDPOINT = env("OIDC_OP_AUTHORIZATION_ENDPOINT")
OIDC_OP_TOKEN_ENDPOINT = env("OIDC_OP_TOKEN_ENDPOINT")
OIDC_OP_USER_ENDPOINT = env("OIDC_OP_USER_ENDPOINT")
OIDC_OP_JWKS_ENDPOINT = env("OIDC_OP_JWKS_ENDPOINT")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT", 10)
# Where a refused or failed single sign-on lands: the sign-in page, which says why.
LOGIN_REDIRECT_URL_FAILURE = "login"
# The claims (of the provider's userinfo answer) that name the user and list their groups.
OIDC_USERNAME_CLAIM = env("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = env("OIDC_GROUPS_CLAIM", "groups")
# Group sync (tenants/group_mapping.py): provider group -> a role in a team, or portal admin,
# applied at each single sign-on. JSON, e.g. {"gpu-vision-leads": {"team": "vision", "role":
# "lead"}, "gpu-admins": {"admin": true}}; `manage.py check` names a malformed entry.
OIDC_GROUP_MAPPING = env_json("OIDC_GROUP_MAPPING", {})
# A single sign-on lasts this long: the session then ends, and the periodic sync withdraws what
# the groups of a sign-in older than that gave (memberships in mapped teams, admin) until the
# user signs in again. The portal cannot read anyone's groups without their sign-in.
OIDC_SIGN_IN_MAX_AGE_HOURS = env_int("OIDC_SIGN_IN_MAX_AGE_HOURS", 24)
OIDC_STALE_SIGN_IN_CHECK_SECONDS = env_float("OIDC_STALE_SIGN_IN_CHECK_SECONDS", 3600)
if OIDC_ENABLED:
    _oidc_missing = [
        name
        for name in (
            "OIDC_RP_CLIENT_ID",
            "OIDC_RP_CLIENT_SECRET",
            "OIDC_OP_AUTHORIZATION_ENDPOINT",
            "OIDC_OP_TOKEN_ENDPOINT",
            "OIDC_OP_USER_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT",
        )
        if not globals()[name]
    ]
    if _oidc_missing:
        raise ImproperlyConfigured(f"OIDC_ENABLED is on: set {', '.join(_oidc_missing)} too.")
    AUTHENTICATION_BACKENDS.append("accounts.oidc.PortalOIDCBackend")

# Sign-in lockouts (accounts/lockout.py): this many failures for one username from one address,
# or PORTAL_LOGIN_ADDRESS_FAILURE_LIMIT from one address, within the cool-off lock them out for
# the cool-off; each attempt while locked out starts it again. Behind reverse proxies, say how
# many append to X-Forwarded-For (PORTAL_PROXY_COUNT), or every client shares the proxy's address.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = datetime.timedelta(seconds=env_int("AXES_COOLOFF_SECONDS", 900))
PORTAL_LOGIN_ADDRESS_FAILURE_LIMIT = env_int("PORTAL_LOGIN_ADDRESS_FAILURE_LIMIT", 20)
PORTAL_PROXY_COUNT = env_int("PORTAL_PROXY_COUNT", 0)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_HANDLER = "accounts.lockout.LoginLockoutHandler"
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "accounts.lockout.client_address"

# API tokens (django-rest-knox): stored as hashes, each with an expiry. A token made by signing in
# through the API lasts PORTAL_API_TOKEN_DAYS; one made on the "API tokens" page up to
# PORTAL_API_TOKEN_MAX_DAYS; a user holds at most PORTAL_API_TOKENS_PER_USER at once.
PORTAL_API_TOKEN_DAYS = env_int("PORTAL_API_TOKEN_DAYS", 30)
PORTAL_API_TOKEN_MAX_DAYS = env_int("PORTAL_API_TOKEN_MAX_DAYS", 365)
PORTAL_API_TOKENS_PER_USER = env_int("PORTAL_API_TOKENS_PER_USER", 50)
KNOX_TOKEN_MODEL = "accounts.ApiToken"
# knox's own migrations create its table even when its model is swapped for ours: a table nothing
# uses, whose foreign key to auth_user blocks emptying the users table (a test flush).
MIGRATION_MODULES = {"knox": None}
REST_KNOX = {
    "TOKEN_MODEL": KNOX_TOKEN_MODEL,
    "TOKEN_TTL": datetime.timedelta(days=PORTAL_API_TOKEN_DAYS),
    # Recognisable in a leaked file or log (secret scanners look for such prefixes).
    "TOKEN_PREFIX": "gpup_",
    "AUTO_REFRESH": False,
}

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

CELERY_BROKER_URL = env("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", "") or None
# The Redis the web tier keeps shared counts in (followed logs): the broker's, unless said.
PORTAL_REDIS_URL = env("PORTAL_REDIS_URL", CELERY_BROKER_URL)
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
# How often beat lowers the priority of borrowers whose minimum run time is up (the most a
# borrower runs protected beyond it, and a lender waits beyond its bound).
GPUJOBS_BORROWER_PROTECTION_CHECK_SECONDS = env_float(
    "GPUJOBS_BORROWER_PROTECTION_CHECK_SECONDS", 15
)
# How often beat runs each periodic task below, in seconds.
PORTAL_RECONCILE_SWEEP_SECONDS = env_float("PORTAL_RECONCILE_SWEEP_SECONDS", 300)
PORTAL_INVENTORY_SYNC_SECONDS = env_float("PORTAL_INVENTORY_SYNC_SECONDS", 60)
PORTAL_IDLE_CHECK_EVERY_SECONDS = env_float("PORTAL_IDLE_CHECK_EVERY_SECONDS", 60)
# Budgets: how often their spending is measured (and the leads told at 80% and 100%); new work
# is refused on what the last check found.
BILLING_BUDGET_CHECK_SECONDS = env_float("BILLING_BUDGET_CHECK_SECONDS", 900)
GPUJOBS_RESYNC_SECONDS = env_float("GPUJOBS_RESYNC_SECONDS", 60)
SERVING_RESYNC_SECONDS = env_float("SERVING_RESYNC_SECONDS", 60)
PORTAL_GRANT_REMINDER_CHECK_SECONDS = env_float("PORTAL_GRANT_REMINDER_CHECK_SECONDS", 3600)
# Leads are reminded this many days before a grant's last day (on every cluster), once per grant.
PORTAL_GRANT_REMINDER_DAYS = env_int("PORTAL_GRANT_REMINDER_DAYS", 7)
# Webhooks: a delivery that fails (no answer within WEBHOOKS_TIMEOUT_SECONDS, or not a 2xx) is
# tried again after WEBHOOKS_RETRY_BASE_SECONDS, doubling each time up to
# WEBHOOKS_RETRY_MAX_SECONDS (below the broker's visibility timeout), WEBHOOKS_MAX_ATTEMPTS
# times in all; then it is failed. Beat sends every WEBHOOKS_SWEEP_SECONDS what is due and was
# not sent (the broker was down, a worker died mid-send).
WEBHOOKS_TIMEOUT_SECONDS = env_float("WEBHOOKS_TIMEOUT_SECONDS", 10)
# Webhooks never reach the portal's own network (loopback, private, link-local, multicast,
# unique-local addresses), checked when a webhook is saved and on the resolved address at each
# delivery, except these hosts an admin allows: names, addresses or networks (CIDR), e.g. a chat
# bridge inside the company ("chat-bridge.internal,10.20.0.0/16").
WEBHOOKS_ALLOWED_INTERNAL_HOSTS = env_list("WEBHOOKS_ALLOWED_INTERNAL_HOSTS")
WEBHOOKS_MAX_ATTEMPTS = env_int("WEBHOOKS_MAX_ATTEMPTS", 6)
WEBHOOKS_RETRY_BASE_SECONDS = env_float("WEBHOOKS_RETRY_BASE_SECONDS", 30)
WEBHOOKS_RETRY_MAX_SECONDS = env_float("WEBHOOKS_RETRY_MAX_SECONDS", 1800)
WEBHOOKS_SWEEP_SECONDS = env_float("WEBHOOKS_SWEEP_SECONDS", 60)
# Deliveries (and their sweep) go to a Celery queue of their own, read by workers of their own
# (`celery -A portal worker -Q webhooks`): a receiver that answers slowly holds up only other
# deliveries, never a reconcile or the removal of someone's access.
WEBHOOKS_QUEUE = env("WEBHOOKS_QUEUE", "webhooks")
# Sharing layouts: how long the portal waits for the GPU Operator to change a layout's nodes
# before it puts them back and fails the layout (a revert is tried again instead), how often it
# reads the nodes meanwhile, and how often beat checks for layouts whose period ended (and for
# stalled steps).
SHARING_APPLY_TIMEOUT_SECONDS = env_int("SHARING_APPLY_TIMEOUT_SECONDS", 1800)
SHARING_POLL_SECONDS = env_float("SHARING_POLL_SECONDS", 5)
SHARING_CHECK_SECONDS = env_float("SHARING_CHECK_SECONDS", 300)
CELERY_TASK_ROUTES = ("portal.celery.route_task",)
CELERY_BEAT_SCHEDULE = {
    # Expires grants whose period is over, then reconciles every team on every cluster: repairs
    # hand edits and shrinks the quotas of expired grants.
    "reconcile-sweep": {
        "task": "reconcile.tasks.reconcile_sweep",
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
    "check-budgets": {
        "task": "billing.tasks.check_budgets",
        "schedule": BILLING_BUDGET_CHECK_SECONDS,
    },
    # GPU jobs: re-enqueue queued jobs nobody is creating; bring active jobs in line with their
    # clusters from full lists (whatever the watcher missed).
    "resync-gpu-jobs": {
        "task": "gpujobs.tasks.resync_jobs",
        "schedule": GPUJOBS_RESYNC_SECONDS,
    },
    # Kueue mode: borrowers whose minimum run time is up may be preempted again.
    "end-borrower-protection": {
        "task": "gpujobs.tasks.end_borrower_protection",
        "schedule": GPUJOBS_BORROWER_PROTECTION_CHECK_SECONDS,
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
    # Leads of grants that end within PORTAL_GRANT_REMINDER_DAYS: a reminder with a link to
    # request an extension (once per grant and end date, so running it often is harmless).
    "remind-grants-ending": {
        "task": "monitoring.tasks.remind_grants_ending",
        "schedule": PORTAL_GRANT_REMINDER_CHECK_SECONDS,
    },
    # Single sign-on: what the groups of a sign-in older than OIDC_SIGN_IN_MAX_AGE_HOURS gave
    # is withdrawn until the user signs in again (accounts.sso).
    "expire-stale-sign-ins": {
        "task": "accounts.tasks.expire_stale_sign_ins",
        "schedule": OIDC_STALE_SIGN_IN_CHECK_SECONDS,
    },
    # Sharing layouts whose period ended go back to whole GPUs; stalled steps are sent again.
    "check-sharing-layouts": {
        "task": "sharing.tasks.check_layouts",
        "schedule": SHARING_CHECK_SECONDS,
    },
    # Webhook deliveries that are due and nobody is sending.
    "send-due-webhook-deliveries": {
        "task": "webhooks.tasks.send_due_deliveries",
        "schedule": WEBHOOKS_SWEEP_SECONDS,
    },
}

# Monitoring: one Prometheus call may take MONITORING_PROMETHEUS_TIMEOUT seconds; answers are
# reused for MONITORING_CACHE_SECONDS (in the cache below); charts refresh themselves every
# MONITORING_REFRESH_SECONDS; usage reports sample GPUs every MONITORING_USAGE_RESOLUTION_SECONDS.
MONITORING_PROMETHEUS_TIMEOUT = env_float("MONITORING_PROMETHEUS_TIMEOUT", 10)
MONITORING_CACHE_SECONDS = env_float("MONITORING_CACHE_SECONDS", 15)
MONITORING_REFRESH_SECONDS = env_int("MONITORING_REFRESH_SECONDS", 30)
MONITORING_USAGE_RESOLUTION_SECONDS = env_int("MONITORING_USAGE_RESOLUTION_SECONDS", 60)
# A cluster with more GPUs (and MIG instances) than MONITORING_HEATMAP_GPU_ROWS gets a heatmap
# of its GPUs counted by utilisation band rather than a row per GPU, which nobody could read.
MONITORING_HEATMAP_GPU_ROWS = env_int("MONITORING_HEATMAP_GPU_ROWS", 256)
# A report period's settled GPU-hours (monitoring.measured_hours) are kept this long; 0: never.
MONITORING_USAGE_CACHE_SECONDS = env_int("MONITORING_USAGE_CACHE_SECONDS", 35 * 24 * 3600)
# The cache, where monitoring pages keep what they drew. With DJANGO_CACHE_URL (a Redis, as in
# docker compose, `make test` and `make bench`) every web worker and process shares it: a page one
# gunicorn worker drew is warm for the others. Without it (the demo) each process keeps its own in
# memory. Keys start with the database's name (DJANGO_CACHE_KEY_PREFIX to choose another), so
# portals or test sessions sharing a Redis never read each other's entries.
DJANGO_CACHE_URL = env("DJANGO_CACHE_URL")
if DJANGO_CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": DJANGO_CACHE_URL,
            "KEY_PREFIX": env("DJANGO_CACHE_KEY_PREFIX", str(DATABASES["default"]["NAME"])),
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "portal",
        }
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
# Team passes a sweep runs side by side on one cluster (reconcile.sweep): threads of the
# worker running the sweep, each with its own database connection.
PORTAL_RECONCILE_SWEEP_CONCURRENCY = env_int("PORTAL_RECONCILE_SWEEP_CONCURRENCY", 8)
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
# Kueue mode: how often the watcher reads each cluster's queues (usage, positions).
GPUJOBS_QUEUE_POLL_SECONDS = env_float("GPUJOBS_QUEUE_POLL_SECONDS", 2)
GPUJOBS_LOG_FOLLOW_MAX_SECONDS = env_int("GPUJOBS_LOG_FOLLOW_MAX_SECONDS", 600)
# Followed logs at once (workloads/log_follows.py), per user and in all, counted in Redis.
GPUJOBS_LOG_FOLLOWS_PER_USER = env_int("GPUJOBS_LOG_FOLLOWS_PER_USER", 4)
GPUJOBS_LOG_FOLLOWS_TOTAL = env_int("GPUJOBS_LOG_FOLLOWS_TOTAL", 200)

# What the watcher process (``manage.py watch_jobs``) follows: one ``run`` per workload app.
PORTAL_WATCHERS = ["gpujobs.watcher.run", "serving.watcher.run", "interactive.watcher.run"]
# Several watcher replicas: per cluster, only the holder of a Lease named
# ``<GPUJOBS_WATCHER_LEASE_NAME>-<cluster>`` in PORTAL_NAMESPACE on that cluster follows it
# (workloads/leader_election.py). The holder renews it every GPUJOBS_WATCHER_RENEW_SECONDS and
# stops writing when a renewal has not succeeded for the lease's duration less one interval;
# another replica takes it over once it has stood unrenewed for GPUJOBS_WATCHER_LEASE_SECONDS.
GPUJOBS_WATCHER_LEADER_ELECTION = env_bool("GPUJOBS_WATCHER_LEADER_ELECTION", True)
GPUJOBS_WATCHER_LEASE_NAME = env("GPUJOBS_WATCHER_LEASE_NAME", f"{PORTAL_NAME}-watcher")
GPUJOBS_WATCHER_LEASE_SECONDS = env_int("GPUJOBS_WATCHER_LEASE_SECONDS", 15)
GPUJOBS_WATCHER_RENEW_SECONDS = env_float("GPUJOBS_WATCHER_RENEW_SECONDS", 5)
if not 0 < GPUJOBS_WATCHER_RENEW_SECONDS < GPUJOBS_WATCHER_LEASE_SECONDS:
    raise ImproperlyConfigured(
        "GPUJOBS_WATCHER_RENEW_SECONDS must be positive and shorter than "
        f"GPUJOBS_WATCHER_LEASE_SECONDS ({GPUJOBS_WATCHER_LEASE_SECONDS})."
    )

# Inference services: the Gateway (``namespace/name``) their HTTPRoutes attach to on clusters
# with the Gateway API (empty: routes name no parent, for a gateway controller that adopts
# them, or to be attached by hand); how often service pages refresh.
SERVING_GATEWAY = env("SERVING_GATEWAY", "")
SERVING_REFRESH_SECONDS = env_int("SERVING_REFRESH_SECONDS", 2)

# Interactive sessions: how long the portal's proxy (interactive/proxy.py) waits for a session's
# notebook server to take a connection before answering 502; once connected it waits as long as
# the server takes (notebook pages hold long requests open).
SESSIONS_PROXY_CONNECT_TIMEOUT_SECONDS = env_float("SESSIONS_PROXY_CONNECT_TIMEOUT_SECONDS", 5)

# Interactive sessions (notebooks): the portal's default image (deploy/notebook/, JupyterLab on
# port 8888), what a session asks for when its member says nothing, the most a team's policy may
# allow, the StorageClass of home volumes (empty: the cluster's default), and how often the
# culling check asks each running server for its activity.
SESSIONS_DEFAULT_IMAGE = env("SESSIONS_DEFAULT_IMAGE", "localhost/gpu-portal-notebook:dev")
SESSIONS_IMAGE_PULL_POLICY = env("SESSIONS_IMAGE_PULL_POLICY", "IfNotPresent")
SESSIONS_SERVER_PORT = env_int("SESSIONS_SERVER_PORT", 8888)
SESSIONS_DEFAULT_CPU_CORES = env("SESSIONS_DEFAULT_CPU_CORES", "1")
SESSIONS_DEFAULT_MEMORY_GIB = env("SESSIONS_DEFAULT_MEMORY_GIB", "2")
SESSIONS_DEFAULT_LIFETIME_HOURS = env_int("SESSIONS_DEFAULT_LIFETIME_HOURS", 8)
SESSIONS_MAX_LIFETIME_HOURS = env_int("SESSIONS_MAX_LIFETIME_HOURS", 24)
SESSIONS_DEFAULT_HOME_GIB = env_int("SESSIONS_DEFAULT_HOME_GIB", 10)
SESSIONS_DEFAULT_IDLE_MINUTES = env_int("SESSIONS_DEFAULT_IDLE_MINUTES", 60)
SESSIONS_DEFAULT_WARN_MINUTES = env_int("SESSIONS_DEFAULT_WARN_MINUTES", 15)
SESSIONS_STORAGE_CLASS = env("SESSIONS_STORAGE_CLASS", "")
SESSIONS_CULL_CHECK_SECONDS = env_int("SESSIONS_CULL_CHECK_SECONDS", 60)
# Extra tolerations and a node selector for sessions without GPUs (JSON), for clusters whose CPU
# nodes are tainted; GPU sessions go where every GPU pod goes.
SESSIONS_CPU_TOLERATIONS = env_json("SESSIONS_CPU_TOLERATIONS", [])
SESSIONS_CPU_NODE_SELECTOR = env_json("SESSIONS_CPU_NODE_SELECTOR", {})

PORTAL_LOG_LEVEL = env("PORTAL_LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # No URL credentials in any log line, whoever logs it (core/redaction.py).
    "filters": {"redact": {"()": "core.redaction.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": PORTAL_LOG_LEVEL},
}

# Sessions: the safety net that starts lost ones and re-reads their state, and the idle check.
CELERY_BEAT_SCHEDULE["resync-sessions"] = {
    "task": "interactive.tasks.resync_sessions",
    "schedule": GPUJOBS_RESYNC_SECONDS,
}
CELERY_BEAT_SCHEDULE["cull-sessions"] = {
    "task": "interactive.tasks.cull_sessions",
    "schedule": SESSIONS_CULL_CHECK_SECONDS,
}
