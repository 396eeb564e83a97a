"""The image's own commands, run here as the Dockerfile runs them (no Docker engine on these
machines): collectstatic with DEBUG off, then gunicorn serving the portal. Pages render, static
files come from WhiteNoise under hashed names, and errors show no debug page."""

import os
import re
import subprocess
import sys

import httpx
import pytest

from tests.integration.conftest import REPO_ROOT, _database_url, free_port, wait_for

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def production_server(postgres_database, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("production")
    env = {
        **os.environ,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "production-server-test-only",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        "DATABASE_URL": _database_url(postgres_database),
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO_ROOT, env=env, check=True, capture_output=True,
    )  # fmt: skip
    port = free_port()
    with open(tmp_path / "gunicorn.log", "w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "portal.wsgi:application",
             "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def answering():
        if server.poll() is not None:
            pytest.fail(f"gunicorn exited:\n{(tmp_path / 'gunicorn.log').read_text()[-3000:]}")
        try:
            return httpx.get(f"{base}/login/", timeout=5)
        except httpx.HTTPError:
            return None

    wait_for(answering, timeout=60, interval=0.5, what="gunicorn to answer")
    yield base
    server.terminate()
    server.wait(timeout=30)


def test_gunicorn_serves_pages_and_hashed_static_files_with_debug_off(production_server):
    login = httpx.get(f"{production_server}/login/")
    assert login.status_code == 200
    assert "<form" in login.text

    stylesheet = re.search(r'href="(/static/[^"]+\.[0-9a-f]{12}\.css)"', login.text)
    assert stylesheet, "the page links no hashed stylesheet"
    asset = httpx.get(f"{production_server}{stylesheet[1]}")
    assert asset.status_code == 200
    assert "immutable" in asset.headers["Cache-Control"]

    plotly = httpx.get(f"{production_server}/static/plotly/plotly.min.js")
    assert plotly.status_code == 200
    assert len(plotly.content) > 1_000_000


def test_with_debug_off_errors_show_no_debug_page(production_server):
    missing = httpx.get(f"{production_server}/no-such-page/")
    assert missing.status_code == 404
    assert "Traceback" not in missing.text
    assert "DEBUG = True" not in missing.text

    other_host = httpx.get(f"{production_server}/login/", headers={"Host": "evil.example"})
    assert other_host.status_code == 400


def test_the_api_asks_for_credentials(production_server):
    response = httpx.get(f"{production_server}/api/v1/teams/")
    assert response.status_code in (401, 403)
    assert "detail" in response.json()


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
            headers={**headers, "Content-Type": raw.content_type},
            timeout=120,
        )
        assert response.status_code == 413, (raw.label, response.text[:300])
        assert "detail" in response.json()

    assert (Team.objects.count(), AuditEvent.objects.count()) == before
