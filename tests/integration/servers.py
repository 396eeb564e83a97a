"""The portal served as the Dockerfile serves it, for tests that need a real server process:
``collectstatic`` with DEBUG off, then gunicorn running the ASGI application in its asgi
worker, on the test database. Plain http on loopback: the test plays the TLS-terminating proxy
that production has in front, sending ``X-Forwarded-Proto: https`` (``BEHIND_TLS_PROXY``)."""

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.dockerfile import dockerfile_environment, gunicorn_arguments
from tests.integration.conftest import (
    REPO_ROOT,
    _database_url,
    free_port,
    stop_process,
    wait_for,
)

# What the TLS-terminating proxy in front of the portal adds to every request it passes on.
BEHIND_TLS_PROXY = {"X-Forwarded-Proto": "https"}


def production_environment(database: dict, directory: Path, **variables: str) -> dict:
    """The environment the portal runs under in production (DEBUG off), on the test database;
    ``variables`` add to or override it. The browser tests' ``DJANGO_ALLOW_ASYNC_UNSAFE`` (for
    Playwright's sync API in the test process) is no production setting: it is left out."""
    return {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        **dockerfile_environment(),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "production-server-test-only-" + "x" * 40,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_STATIC_ROOT": str(directory / "static"),
        "DATABASE_URL": _database_url(database),
        **variables,
    }


@contextlib.contextmanager
def portal_server(
    database: dict, directory: Path, *, workers: int = 1, **variables: str
) -> Iterator[str]:
    """Serve the portal on a free port and yield its base URL; ``variables`` add to (or
    override) the production environment."""
    env = production_environment(database, directory, **variables)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    port = free_port()
    log_path = directory / "gunicorn.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                *gunicorn_arguments(bind=f"127.0.0.1:{port}", workers=workers),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def answering():
        if server.poll() is not None:
            pytest.fail(f"gunicorn exited:\n{log_path.read_text()[-3000:]}")
        try:
            return httpx.get(f"{base}/login/", headers=BEHIND_TLS_PROXY, timeout=5)
        except httpx.HTTPError:
            return None

    try:
        wait_for(answering, timeout=60, interval=0.5, what="gunicorn to answer")
        server.log_path = log_path
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


@contextlib.contextmanager
def demo_server(database: dict, directory: Path, **variables: str) -> Iterator[str]:
    """Serve the portal as the demo does (scripts/demo.sh: uvicorn, DEBUG on) on the test
    database, signing cookies with this process's secret key, and yield its base URL."""
    from django.conf import settings

    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DATABASE_URL": _database_url(database),
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
        **variables,
    }
    port = free_port()
    log_path = directory / "uvicorn.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "uvicorn", "portal.asgi:application"),
                *("--host", "127.0.0.1", "--port", str(port)),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def answering():
        if process.poll() is not None:
            pytest.fail(f"uvicorn exited:\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{base}/login/", timeout=5).status_code == 200
        return False

    try:
        wait_for(answering, timeout=60, interval=0.3, what="the portal under uvicorn")
        process.log_path = log_path
        yield base
    finally:
        stop_process(process)
