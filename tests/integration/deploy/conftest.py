"""Helm, as ``python -m devcluster build`` builds it (``scripts/test.sh`` runs that first)."""

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from devcluster import builder, images

CHART = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "gpu-portal"
# What every install has to give (or name a Secret of its own instead).
REQUIRED = {
    "secrets.secretKey": "chart-test-only-" + "k" * 40,
    "secrets.databaseUrl": "postgres://portal:pw@postgres.db:5432/portal?connect_timeout=3",
    "secrets.brokerUrl": "redis://redis.db:6379/0",
}
# Single sign-on, every value the chart needs for it.
OIDC = {
    "oidc.enabled": "true",
    "oidc.providerName": "Keycloak",
    "oidc.clientId": "portal",
    "oidc.clientSecret": "s3cret",
    "oidc.endpoints.authorization": "https://sso.example.org/auth",
    "oidc.endpoints.token": "https://sso.example.org/token",
    "oidc.endpoints.user": "https://sso.example.org/userinfo",
    "oidc.endpoints.jwks": "https://sso.example.org/certs",
    "oidc.groupMapping.gpu-vision-leads.team": "vision",
    "oidc.groupMapping.gpu-vision-leads.role": "lead",
    "oidc.groupMapping.gpu-admins.admin": "true",
    "oidc.signInMaxAgeHours": 8,
}


@pytest.fixture(scope="session")
def portal_image() -> str:
    """The portal's image, built from the Dockerfile as `python -m devcluster image` builds it
    (its layers cached: a build with nothing changed takes seconds)."""
    missing = images.missing_tools()
    if missing:
        pytest.fail(f"not installed: {', '.join(missing)} (scripts/bootstrap.sh installs them)")
    return images.build_portal(CHART.parents[2])


@pytest.fixture(scope="session")
def helm() -> "Helm":
    path = builder.binary("helm")
    (tool,) = [build for build in builder.TOOL_BUILDS if build.name == "helm"]
    if not builder.tool_built(tool):
        pytest.fail(
            f"helm is not built for its pin at {path}: run `.venv/bin/python -m devcluster "
            "build` (scripts/test.sh does)",
            pytrace=False,
        )
    return Helm(path)


class Helm:
    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.path), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            # No repositories, plugins or caches of a developer's own.
            env={**os.environ, "HELM_CONFIG_HOME": "/nonexistent", "HELM_NO_PLUGINS": "1"},
        )

    def template(
        self, *, namespace: str = "gpu-portal", values: dict | None = None, required: bool = True
    ) -> str:
        """The chart rendered as `helm template` does (hooks included); fails the test if Helm
        refuses."""
        result = self.run(
            "template", "portal", str(CHART), "-n", namespace, *sets(values, required)
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def objects(self, **kwargs) -> list[dict]:
        return [doc for doc in yaml.safe_load_all(self.template(**kwargs)) if doc]


def sets(values: dict | None, required: bool = True) -> list[str]:
    given = {**(REQUIRED if required else {}), **(values or {})}
    return [arg for name, value in given.items() for arg in ("--set", f"{name}={value}")]


def by_kind_and_name(objects: list[dict]) -> dict[tuple[str, str], dict]:
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}
