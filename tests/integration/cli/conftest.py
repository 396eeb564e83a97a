"""The command-line client against a running portal: ``cli(...)`` runs ``gpuportal`` (its
``main``, in this process) with a configuration folder of the test's own, against pytest-django's
``live_server``, or against the server a test names with ``--url``."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass

import pytest

from gpuportal import cli as gpuportal_cli
from gpuportal import config
from tests import factories
from tests.integration.gpujobs.fixtures import (  # noqa: F401 (fixtures)
    gpu_cluster,
    make_gpu_team,
    portal_kubeconfig,
    running_services,
    watcher_process,
)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


class Cli:
    """``cli("jobs", "list")`` runs one command and returns its ``Result``."""

    def __init__(self, url: str):
        self.url = url

    def __call__(self, *argv: str, stdin: str = "") -> Result:
        out, err = io.StringIO(), io.StringIO()
        saved = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            code = gpuportal_cli.main([str(a) for a in argv], stdout=out, stderr=err)
        finally:
            sys.stdin = saved
        return Result(code, out.getvalue(), err.getvalue())

    def login(self, user, password: str = factories.PASSWORD, url: str | None = None) -> Result:
        return self(
            "login",
            "--url",
            url or self.url,
            "-u",
            user.username,
            "--password-stdin",
            stdin=password + "\n",
        )


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    """An empty configuration folder, and no ``GPUPORTAL_*`` variables from outside."""
    home = tmp_path / "config-home"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.delenv(config.URL_VARIABLE, raising=False)
    monkeypatch.delenv(config.TOKEN_VARIABLE, raising=False)
    return home


@pytest.fixture
def cli(live_server, config_home) -> Cli:
    return Cli(live_server.url)
