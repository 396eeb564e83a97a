"""The image's own commands, run here as the Dockerfile runs them (no Docker engine on these
machines): collectstatic with DEBUG off, then gunicorn serving the portal. Pages render, static
files come from WhiteNoise under hashed names, and errors show no debug page.

In production a TLS-terminating proxy sits in front of gunicorn and says so with
``X-Forwarded-Proto: https`` (the production settings trust that header and redirect plain
http). The test talks plain http on loopback and sends that header as the proxy would; one test
leaves it out and sees the redirect to https.
"""

import os
import re
import subprocess
import sys

import httpx
import pytest

from tests.integration.conftest import REPO_ROOT, _database_url, free_port, wait_for

pytestmark = [pytest.mark.integration]

# What the TLS-terminating proxy in front of the portal adds to every request it passes on.
BEHIND_TLS_PROXY = {"X-Forwarded-Proto": "https"}


def get(url: str, **kwargs) -> httpx.Response:
    return httpx.get(url, headers={**BEHIND_TLS_PROXY, **kwargs.pop("headers", {})}, **kwargs)


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
            return httpx.get(f"{base}/login/", headers=BEHIND_TLS_PROXY, timeout=5)
        except httpx.HTTPError:
            return None

    wait_for(answering, timeout=60, interval=0.5, what="gunicorn to answer")
    yield base
    server.terminate()
    server.wait(timeout=30)


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
