"""The chart's manifests, as `helm template` renders them, are accepted by the devcluster's API
server: `kubectl apply --dry-run=server` runs every object through validation, defaulting and
admission (webhooks and admission policies included, CEL type-checked) without storing it. The
namespace the release goes to exists for real (a namespaced dry run needs it) and is deleted
after."""

import subprocess
import uuid

import pytest
import yaml

from devcluster import builder
from tests.integration.deploy.conftest import OIDC, by_kind_and_name

pytestmark = [pytest.mark.integration]


@pytest.fixture
def kubectl(devcluster):
    path = builder.binary("kubectl")

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(path), "--kubeconfig", str(devcluster.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


@pytest.fixture
def namespace(kubectl):
    name = f"chart-{uuid.uuid4().hex[:8]}"
    created = kubectl("create", "namespace", name)
    assert created.returncode == 0, created.stderr
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


def dry_run(kubectl, namespace: str, manifests: str) -> subprocess.CompletedProcess:
    return kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=manifests)


def assert_accepted(result: subprocess.CompletedProcess, manifests: str) -> None:
    assert result.returncode == 0, result.stderr
    objects = by_kind_and_name([doc for doc in yaml.safe_load_all(manifests) if doc])
    assert len(result.stdout.splitlines()) == len(objects), result.stdout
    lines = result.stdout.splitlines()
    for kind, name in objects:
        # e.g. "clusterrole.rbac.authorization.k8s.io/gpu-portal created (server dry run)"
        assert any(
            line.split("/")[0].split(".")[0] == kind.lower() and f"/{name} " in line
            for line in lines
        ), (kind, name, result.stdout)
    assert all(line.endswith("(server dry run)") for line in lines), result.stdout


def test_the_default_values_are_accepted_by_the_api_server(helm, kubectl, namespace):
    manifests = helm.template(namespace=namespace)

    assert_accepted(dry_run(kubectl, namespace, manifests), manifests)


def test_overrides_are_accepted_by_the_api_server(helm, kubectl, namespace):
    manifests = helm.template(
        namespace=namespace,
        required=False,
        values={
            "portalName": "chart-test-portal",
            "secrets.existingSecret": "portal-settings",
            "web.replicas": 4,
            "web.podDisruptionBudget.minAvailable": "50%",
            "worker.replicas": 3,
            "webhookWorker.replicas": 2,
            "webhookWorker.queue": "hooks",
            "ingress.enabled": "true",
            "ingress.host": "gpus.example.org",
            "ingress.tlsSecretName": "gpus-tls",
            "service.type": "NodePort",
            "config.allowedHosts": "{gpus.example.org}",
            "watcher.leaderElection.enabled": "false",
            "watcher.replicas": 1,
            **OIDC,
        },
    )

    assert_accepted(dry_run(kubectl, namespace, manifests), manifests)


def test_the_api_server_judges_what_the_schema_lets_through(helm, kubectl, namespace):
    manifests = helm.template(
        namespace=namespace, values={"ingress.enabled": "true", "ingress.host": "Not_A_Host"}
    )

    result = dry_run(kubectl, namespace, manifests)

    assert result.returncode != 0
    assert "Not_A_Host" in result.stderr
    assert "spec.rules[0].host" in result.stderr
