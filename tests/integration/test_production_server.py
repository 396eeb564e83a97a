"""The image's own commands, run here as the Dockerfile runs them (no Docker engine on these
machines): collectstatic with DEBUG off, then gunicorn serving the portal's ASGI application in
its asgi worker (tests/integration/servers.py). Pages render, static files come from WhiteNoise
under hashed names, and errors show no debug page.

In production a TLS-terminating proxy sits in front of gunicorn and says so with
``X-Forwarded-Proto: https`` (the production settings trust that header and redirect plain
http). The test talks plain http on loopback and sends that header as the proxy would; one test
leaves it out and sees the redirect to https.
"""

import re
import subprocess
import sys

import httpx
import psycopg
import pytest

from tests.dockerfile import dockerfile_environment
from tests.integration.conftest import REPO_ROOT, _database_url
from tests.integration.servers import (
    BEHIND_TLS_PROXY,
    portal_server,
    production_environment,
)

pytestmark = [pytest.mark.integration]


def get(url: str, **kwargs) -> httpx.Response:
    return httpx.get(url, headers={**BEHIND_TLS_PROXY, **kwargs.pop("headers", {})}, **kwargs)


@pytest.fixture(scope="module")
def production_server(postgres_database, tmp_path_factory):
    with portal_server(postgres_database, tmp_path_factory.mktemp("production")) as base:
        yield base


def test_the_deployment_checks_pass_with_the_production_environment(postgres_database, tmp_path):
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env=production_environment(postgres_database, tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert "System check identified no issues" in checked.stdout


def test_gunicorn_serves_pages_and_hashed_static_files_with_debug_off(production_server):
    login = get(f"{production_server}/login/")
    assert login.status_code == 200
    assert "<form" in login.text

    stylesheet = re.search(r'href="(/static/[^"]+\.[0-9a-f]{12}\.css)"', login.text)
    assert stylesheet, "the page links no hashed stylesheet"
    asset = get(f"{production_server}{stylesheet[1]}")
    assert asset.status_code == 200
    assert "immutable" in asset.headers["Cache-Control"]

    plotly = get(f"{production_server}/static/plotly/plotly.min.js")
    assert plotly.status_code == 200
    assert len(plotly.content) > 1_000_000


def test_with_debug_off_errors_show_no_debug_page(production_server):
    missing = get(f"{production_server}/no-such-page/")
    assert missing.status_code == 404
    assert "Traceback" not in missing.text
    assert "DEBUG = True" not in missing.text

    other_host = get(f"{production_server}/login/", headers={"Host": "evil.example"})
    assert other_host.status_code == 400


def test_the_api_asks_for_credentials(production_server):
    response = get(f"{production_server}/api/v1/teams/")
    assert response.status_code in (401, 403)
    assert "detail" in response.json()


def test_plain_http_is_redirected_to_https(production_server):
    response = httpx.get(f"{production_server}/login/?next=/jobs/")

    assert response.status_code == 301
    host = production_server.removeprefix("http://")
    assert response.headers["Location"] == f"https://{host}/login/?next=/jobs/"


def test_over_https_browsers_are_told_to_stay_on_https_and_cookies_are_secure(production_server):
    login = get(f"{production_server}/login/")

    assert login.headers["Strict-Transport-Security"] == (
        "max-age=31536000; includeSubDomains; preload"
    )
    csrf_cookie = login.headers["Set-Cookie"]
    assert "csrftoken=" in csrf_cookie
    assert "Secure" in csrf_cookie


def test_ten_megabyte_bodies_are_refused_through_gunicorn_and_write_nothing(
    production_server, transactional_db
):
    """The corpus's 10 MB bodies (``tests/abuse``), as a real server receives them: refused
    with a 413 in JSON before any view reads them, and nothing written."""
    from tenants.models import AuditEvent, Team
    from tests import factories
    from tests.abuse.corpus import BODIES
    from tests.tokens import api_token, auth_headers

    admin = factories.AdminFactory(username="big-body-admin")
    headers = auth_headers(api_token(admin))
    before = (Team.objects.count(), AuditEvent.objects.count())

    for raw in (b for b in BODIES if b.label.startswith("ten-mb")):
        response = httpx.post(
            f"{production_server}/api/v1/teams/",
            content=raw.content,
            headers={**BEHIND_TLS_PROXY, **headers, "Content-Type": raw.content_type},
            timeout=120,
        )
        assert response.status_code == 413, (raw.label, response.text[:300])
        assert "detail" in response.json()

    assert (Team.objects.count(), AuditEvent.objects.count()) == before


@pytest.mark.django_db
def test_the_server_keeps_a_pool_of_database_connections_across_requests(
    postgres_database, tmp_path
):
    """The image sets DJANGO_DB_POOL_MAX_SIZE: requests hand their connection back to the
    process's pool rather than closing it, so the same few PostgreSQL backends serve request
    after request (without the pool none is left once the requests are answered)."""
    application = f"pool-test-{tmp_path.name}"[:63]
    pool_size = int(dockerfile_environment()["DJANGO_DB_POOL_MAX_SIZE"])

    def server_backends() -> set[int]:
        with psycopg.connect(_database_url(postgres_database)) as watcher:
            rows = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [application]
            ).fetchall()
        return {pid for (pid,) in rows}

    with portal_server(postgres_database, tmp_path, PGAPPNAME=application) as base:
        for _ in range(20):
            assert get(f"{base}/readyz").status_code == 200
        after_first = server_backends()
        for _ in range(20):
            assert get(f"{base}/readyz").status_code == 200
        after_second = server_backends()

    assert 1 <= len(after_first) <= pool_size
    assert after_first == after_second
