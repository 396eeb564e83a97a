"""The suite's database, its service markers, and fixtures that make permission tests read like
sentences.

Two runs, chosen here and nowhere else:

- ``pytest`` (``make test``, CI): the suite runs on PostgreSQL. ``scripts/services.sh up`` starts a
  private one and exports its ``DATABASE_URL``; a database test on anything else fails at once.
- ``pytest --fast`` (``make test-fast``): SQLite in memory, whatever ``DATABASE_URL`` says, the
  cache in memory, whatever ``DJANGO_CACHE_URL`` says, and no service started. Tests marked as
  needing a service are deselected; one selected anyway (``-m``) fails and says why, so the fast
  loop never passes a test it cannot prove. The schema is built from the models rather than by
  replaying the migrations: the full run replays them, and checks that they match the models.

The bad-input suites (``tests/abuse``, marked ``abuse``) need no service but take minutes of CPU:
the fast loop leaves them out unless asked (``make test-abuse``: ``pytest --fast -m abuse``), and
the full run runs them on PostgreSQL.

A test gets its service markers from the fixtures it uses (``SERVICE_FIXTURES``), so a new test that
asks for the ``devcluster`` or a worker is marked without saying so; mark by hand only what needs
PostgreSQL without such a fixture (``@pytest.mark.postgres``).

Two teams share one cluster: ``lead`` leads team A (``team``) where ``member`` and ``viewer``
also belong; ``other_lead`` leads team B (``other_team``), which nobody in team A belongs to.
Team A may be in department ``research`` (administered by ``dept_admin``); team B is in none.
"""

import json
import os
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management.base import CommandError
from django.db import connections
from django.test import Client, TransactionTestCase
from django.test.utils import override_settings
from rest_framework.test import APIClient

from devcluster import keycloak as keycloak_provider
from tenants.models import DepartmentCeiling, Membership
from tests import factories

# The session-scoped `devcluster` fixture: a real control plane with simulated GPU nodes.
pytest_plugins = ["devcluster.pytest_plugin"]

# What a test needs beyond Python and an SQLite database, by the fixtures that provide it (the
# markers are registered in pyproject.toml). A test commits (``transactional_db``, or
# ``django_db(transaction=True)``) only so that threads or other processes see its rows: a race
# that SQLite would serialize behind its table lock is PostgreSQL's to prove.
COMMITTING = ["postgres"]
SERVICE_FIXTURES = {
    "postgres_database": ["postgres"],
    "transactional_db": COMMITTING,
    "celery_worker_process": ["worker", "redis"],
    "start_worker": ["worker", "redis"],
    "watcher_process": ["worker"],
    "beat": ["worker", "redis"],
    "own_queue": ["redis"],
    "redis_url": ["redis"],
    "own_redis": ["redis"],
    "shared_cache": ["redis"],
    "devcluster": ["devcluster"],
    "devcluster_second": ["devcluster"],
    "real_node": ["devcluster", "real_node"],
    "gateway": ["devcluster", "real_node"],
    # The fault tests' own PostgreSQL, Redis and portal processes (tests/integration/faults).
    "private_portal": ["postgres", "redis", "worker"],
    "promtool": ["prometheus"],
    "helm": ["helm"],
    "portal_image": ["containers"],
    "own_prometheus": ["prometheus"],
    "start_prometheus": ["prometheus"],
    "guarded_prometheus": ["prometheus"],
    "relabelling_prometheus": ["prometheus"],
    "browser": ["browser"],
    "keycloak": ["keycloak"],
}
SERVICE_MARKERS = sorted({marker for markers in SERVICE_FIXTURES.values() for marker in markers})
# Left out of the fast loop by default for their time alone: they can run there (``-m``).
SLOW_MARKERS = ["abuse"]
# Every test under it is marked ``abuse`` (tests/abuse/conftest.py).
ABUSE_DIR = Path(__file__).resolve().parent / "abuse"
# Whether this run deselects what ``--fast`` leaves out by default (no ``-m`` given).
FAST_DEFAULT_SELECTION = pytest.StashKey[bool]()
FAST_DATABASE = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
FAST_CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        help="SQLite in memory and no services: deselects tests marked "
        + ", ".join(SERVICE_MARKERS + SLOW_MARKERS)
        + " (unless -m says otherwise)",
    )


def _fast(config) -> bool:
    return config.getoption("--fast")


def pytest_configure(config):
    if not _fast(config):
        return
    if not config.option.markexpr:
        config.option.markexpr = "not (" + " or ".join(SERVICE_MARKERS + SLOW_MARKERS) + ")"
        config.stash[FAST_DEFAULT_SELECTION] = True
    config.option.nomigrations = True
    _use_database(FAST_DATABASE)
    django_settings.CACHES = FAST_CACHES  # whatever DJANGO_CACHE_URL says: no Redis here


def pytest_ignore_collect(collection_path, config):
    """The default fast run deselects the bad-input suites, so it does not collect them at all:
    building schemathesis' cases for every API operation was a third of collecting the suite."""
    if config.stash.get(FAST_DEFAULT_SELECTION, False) and collection_path == ABUSE_DIR:
        return True
    return None


def _use_database(database: dict) -> None:
    """Make ``database`` the default one. Django is set up by now (pytest-django did it before
    loading this file) and holds a wrapper for the configured database, but no open connection:
    the settings are replaced in place and the unused wrapper dropped."""
    for wrapper in connections.all(initialized_only=True):
        if wrapper.connection is not None:
            raise pytest.UsageError("a database connection was opened before the suite chose one")
        del connections[wrapper.alias]
    django_settings.DATABASES["default"] = dict(database)
    connections.configure_settings(django_settings.DATABASES)


def pytest_report_header(config):
    if _fast(config):
        return ["database: SQLite in memory (--fast: no services)"]
    db = django_settings.DATABASES["default"]
    engine = db["ENGINE"].rsplit(".", 1)[-1]
    return [f"database: {engine} {db['NAME']} at {db['HOST']}:{db['PORT']}"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        needs = {
            marker for fixture in item.fixturenames for marker in SERVICE_FIXTURES.get(fixture, ())
        }
        if any(mark.kwargs.get("transaction") for mark in item.iter_markers("django_db")):
            needs.update(COMMITTING)
        for marker in sorted(needs):
            item.add_marker(marker)


def pytest_runtest_setup(item):
    if not _fast(item.config):
        return
    needs = sorted({mark.name for mark in item.iter_markers() if mark.name in SERVICE_MARKERS})
    if needs:
        pytest.fail(
            f"{item.nodeid} is marked {', '.join(needs)}: the fast run (SQLite in memory, no "
            "services) cannot prove it. Run it with `make test`.",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def django_db_modify_db_settings(request, django_db_modify_db_settings):
    """The full run's database is PostgreSQL by construction: refuse to create it elsewhere."""
    engine = django_settings.DATABASES["default"]["ENGINE"]
    if not _fast(request.config) and not engine.endswith("postgresql"):
        given = (
            "names " + engine if "DATABASE_URL" in os.environ else "is unset (the demo's SQLite)"
        )
        pytest.fail(
            f"The test suite runs on PostgreSQL; DATABASE_URL {given}. Start PostgreSQL with "
            '`eval "$(scripts/services.sh up postgres redis)"` (`make test` does), or run the '
            "fast loop on SQLite in memory with `make test-fast` (pytest --fast).",
            pytrace=False,
        )


# A committing test's flush meets a deadlock this many times before it gives up.
FLUSH_ATTEMPTS = 5
DEADLOCK_DETECTED = "40P01"  # PostgreSQL's SQLSTATE


def _deadlocked(error: BaseException | None) -> bool:
    while error is not None:
        if getattr(error, "sqlstate", None) == DEADLOCK_DETECTED:
            return True
        error = error.__cause__
    return False


@pytest.fixture(scope="session", autouse=True)
def _flush_that_outlasts_other_writers():
    """A committing test ends with a flush: one ``TRUNCATE`` of every table, which takes its
    locks table by table in the order of a Python set (so in a different order each session).
    The processes a test started (the Celery worker, the job watcher) may still be writing
    then: a fixture's teardown stops a job, the watcher records its pods going. A writer that
    holds a table the flush has not reached and then touches one it holds deadlocks with it,
    and PostgreSQL gives up the flush, which waited first. Its rows then stay for the next test,
    which meets them as duplicates (a GPU job test's ``GpuCapacity`` row once did). The flush is
    tried again once the writer is through: the writer's own transaction ends either way."""
    flush = TransactionTestCase._fixture_teardown

    def flush_again_after_a_deadlock(self):
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                return flush(self)
            except CommandError as error:
                if attempt == FLUSH_ATTEMPTS or not _deadlocked(error):
                    raise
                time.sleep(0.2 * attempt)

    TransactionTestCase._fixture_teardown = flush_again_after_a_deadlock
    yield
    TransactionTestCase._fixture_teardown = flush


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    """Factories hash a password per user; the default hasher is deliberately slow."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def _usage_hours_measured_afresh():
    """Tests backfill history into past periods of the one Prometheus they share, and the
    cache outlives a test: hours another test kept for the same period would hide theirs. The
    tests of the keeping turn it on, in a cache of their own (``shared_cache``)."""
    with override_settings(MONITORING_USAGE_CACHE_SECONDS=0):
        yield


@pytest.fixture(scope="session", autouse=True)
def _plain_static_storage():
    """Pages reference static files by name; the manifest storage used with DEBUG off needs
    collectstatic first, which tests have no reason to run (the production-server test does)."""
    storages = {
        **django_settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(STORAGES=storages):
        yield


@pytest.fixture
def cluster(db):
    cluster = factories.ClusterFactory(name="gpu-east", display_name="GPU East")
    factories.GpuCapacityFactory(cluster=cluster, allocatable=16)
    return cluster


@pytest.fixture
def admin(db):
    return factories.AdminFactory(username="ada-admin")


@pytest.fixture
def team(db):
    return factories.TeamFactory(slug="vision", name="Vision")


@pytest.fixture
def other_team(db):
    return factories.TeamFactory(slug="speech", name="Speech")


def _member(team, username, role):
    user = factories.UserFactory(username=username)
    factories.MembershipFactory(team=team, user=user, role=role)
    return user


@pytest.fixture
def lead(team):
    return _member(team, "lena-lead", Membership.Role.LEAD)


@pytest.fixture
def member(team):
    return _member(team, "mo-member", Membership.Role.MEMBER)


@pytest.fixture
def viewer(team):
    return _member(team, "vic-viewer", Membership.Role.VIEWER)


@pytest.fixture
def other_lead(other_team):
    return _member(other_team, "otto-other-lead", Membership.Role.LEAD)


@pytest.fixture
def research(team, cluster):
    """Department research holds team vision, with a ceiling of 8 of gpu-east's 12 A100."""
    model = "NVIDIA-A100-SXM4-80GB"
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=model, allocatable=12, nodes=3)
    department = factories.DepartmentFactory(slug="research", name="Research")
    team.department = department
    team.save()
    DepartmentCeiling.objects.create(
        department=department, cluster=cluster, gpu_model=model, gpus=8
    )
    return department


@pytest.fixture
def dept_admin(research):
    """An admin of department research, in no team."""
    user = factories.UserFactory(username="dana-dept-admin")
    research.admins.add(user)
    return user


@pytest.fixture
def outsider(db):
    """A signed-up user who belongs to no team."""
    return factories.UserFactory(username="oscar-outsider")


class PortalAPIClient(APIClient):
    """An API client that sends JSON bodies, as API clients do."""

    default_format = "json"

    def as_user(self, user):
        self.force_authenticate(user=user)
        return self


@pytest.fixture
def api():
    """An API client; ``api.as_user(user)`` authenticates it as that user."""
    return PortalAPIClient()


@pytest.fixture
def client_as():
    """``client_as(user)``: a fresh page client signed in as that user."""

    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


# --- single sign-on: a real OpenID provider -------------------------------------------------------

SSO_REALM = "gpu"
SSO_REALM_FILE = Path(__file__).resolve().parent / "sso" / "realm.json"
SSO_CLIENT_SECRET = "gpu-portal-secret"
# The provider's groups, and what they give in the portal (the teams are the tests' to create).
SSO_GROUP_MAPPING = {
    "gpu-vision-leads": {"team": "vision", "role": "lead"},
    "gpu-vision-members": {"team": "vision", "role": "member"},
    "gpu-nlp-members": {"team": "nlp", "role": "member"},
    "gpu-ghost-members": {"team": "ghost", "role": "member"},
    "gpu-admins": {"admin": True},
}


@pytest.fixture(scope="session")
def keycloak():
    """Keycloak (``devcluster.keycloak``), started once per session with the realm of
    tests/sso/realm.json: clients ``gpu-portal`` (a ``groups`` claim listing the user's groups)
    and ``gpu-portal-malformed-groups`` (a ``groups`` claim that is one string), the groups of
    ``SSO_GROUP_MAPPING`` and users ``lena`` and ``ada``; tests add users of their own."""
    try:
        provider = keycloak_provider.start()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        provider.import_realm(json.loads(SSO_REALM_FILE.read_text()))
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def single_sign_on(keycloak, settings):
    """Single sign-on on, through ``keycloak``'s realm, with ``SSO_GROUP_MAPPING``; returns the
    provider. ``settings.OIDC_RP_CLIENT_ID`` may be changed by the test."""
    settings.OIDC_ENABLED = True
    settings.OIDC_PROVIDER_NAME = "Keycloak"
    settings.OIDC_RP_CLIENT_ID = "gpu-portal"
    settings.OIDC_RP_CLIENT_SECRET = SSO_CLIENT_SECRET
    settings.OIDC_GROUP_MAPPING = SSO_GROUP_MAPPING
    for name, url in keycloak.endpoints(SSO_REALM).items():
        setattr(settings, name, url)
    settings.AUTHENTICATION_BACKENDS = [
        *django_settings.AUTHENTICATION_BACKENDS,
        "accounts.oidc.PortalOIDCBackend",
    ]
    return keycloak
