"""Monitoring against the devcluster's real Prometheus and DCGM simulator.

Each test gets its own namespace (a team's slug) and deletes it afterwards, with its pods. The
portal's cache is off so that a poll sees what Prometheus has now. Nothing here stops or
restarts the shared Prometheus: a Prometheus that is down is a Cluster pointed at a closed port.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.test import Client
from kubernetes import client
from kubernetes.client.rest import ApiException

from monitoring import figures
from tenants.models import Membership
from tests import factories

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

UTILISATION = "devcluster.gpuportal.io/gpu-util"
MANAGED_BY = "app.kubernetes.io/managed-by"
GPU_TERM = {"matchExpressions": [{"key": "hardware-type", "operator": "In", "values": ["gpu"]}]}
GPU_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [GPU_TERM]}
    }
}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def eventually(predicate, *, timeout=60.0, interval=1.0, what="condition"):
    """Poll predicate() until it returns something truthy and return it; fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --- the portal's side -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _on_postgresql(postgres_database):
    """Monitoring's constraints (one open idle episode per pod) are PostgreSQL's to enforce."""


@pytest.fixture(autouse=True)
def _portal_settings(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MONITORING_CACHE_SECONDS = 0  # every poll asks Prometheus afresh
    settings.MONITORING_PROMETHEUS_TIMEOUT = 10
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def metrics_cluster(db, devcluster):
    """The devcluster as a portal Cluster: its kubeconfig and its Prometheus."""
    cluster = factories.ClusterFactory(
        name="devcluster",
        prometheus_url=devcluster.prometheus_url,
        kubeconfig_path=str(devcluster.kubeconfig),
    )
    factories.GpuCapacityFactory(cluster=cluster, allocatable=32)
    return cluster


def member_of(team, username, role=Membership.Role.MEMBER):
    user = factories.UserFactory(username=username)
    factories.MembershipFactory(team=team, user=user, role=role)
    return user


@pytest.fixture
def client_as():
    def make(user) -> Client:
        c = Client()
        c.force_login(user)
        return c

    return make


def figure_on_page(response, key: str) -> dict | None:
    """The Plotly figure a page embeds for chart ``key`` (None when it shows a message)."""
    match = re.search(
        rf'<script id="figure-{re.escape(key)}" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    return json.loads(match.group(1)) if match else None


def chart_values(response, key: str) -> dict:
    figure = figure_on_page(response, key)
    return figures.last_values(figure) if figure else {}


# --- the cluster's side ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def k8s(devcluster):
    api = devcluster.api_client()
    yield api
    api.close()


@pytest.fixture(scope="session")
def core(k8s):
    return client.CoreV1Api(k8s)


@pytest.fixture(scope="session")
def batch(k8s):
    return client.BatchV1Api(k8s)


def create_namespace(core_api, prefix="mon") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    core_api.create_namespace({"metadata": {"name": name}})

    def service_account_ready():
        try:
            return core_api.read_namespaced_service_account("default", name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    eventually(service_account_ready, timeout=30, interval=0.25, what=f"default SA in {name}")
    return name


def delete_namespace(core_api, name: str) -> None:
    try:
        core_api.delete_namespace(name, propagation_policy="Background")
    except ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
def namespace(core):
    """A fresh namespace for one test (it becomes a team's slug), deleted with its pods."""
    name = create_namespace(core)
    yield name
    delete_namespace(core, name)


@pytest.fixture
def other_namespace(core):
    name = create_namespace(core)
    yield name
    delete_namespace(core, name)


def gpu_pod(name, *, gpus=1, utilisation=None, labels=None):
    """A pod the way the portal builds GPU pods: the seed's node affinity, the GPU toleration,
    nvidia.com/gpu in its limits; the devcluster annotation sets its simulated utilisation."""
    annotations = {UTILISATION: str(utilisation)} if utilisation is not None else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations, "labels": dict(labels or {})},
        "spec": {
            "restartPolicy": "Never",
            "affinity": GPU_AFFINITY,
            "tolerations": [GPU_TOLERATION],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/trainer:1",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


def run_pod(core_api, namespace, manifest) -> dict:
    core_api.create_namespaced_pod(namespace, manifest)
    name = manifest["metadata"]["name"]
    pod = eventually(
        lambda: (
            (p := core_api.read_namespaced_pod(name, namespace)).status.phase == "Running" and p
        ),
        timeout=60,
        interval=0.25,
        what=f"pod {namespace}/{name} to run",
    )
    return pod


def portal_job(name, *, utilisation, gpus=1) -> dict:
    """A Job carrying the portal's label, as the jobs app will create them."""
    template = gpu_pod(name, gpus=gpus, utilisation=utilisation, labels={MANAGED_BY: "gpu-portal"})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {MANAGED_BY: "gpu-portal"}},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def prometheus_has(devcluster, promql: str, *, count: int = 1, timeout: float = 60):
    """Wait until an instant query returns at least ``count`` series; return them."""

    def ready():
        try:
            result = devcluster.prometheus_query(promql)
        except OSError:
            return None  # another session may be restarting Prometheus
        return len(result) >= count and result

    return eventually(ready, timeout=timeout, interval=1, what=f"{count} series for {promql}")


# --- Prometheus that is down, slow or wrong ----------------------------------------------------


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _FakePrometheus(BaseHTTPRequestHandler):
    mode = "error"

    def do_GET(self):
        if self.server.mode == "slow":
            time.sleep(self.server.delay)
            return
        body = json.dumps(
            {"status": "error", "errorType": "execution", "error": "out of memory (simulated)"}
        ).encode()
        self.send_response(422)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_prometheus():
    """``fake_prometheus(mode)``: the URL of a local server that answers every query with an
    error (``error``) or not at all for a while (``slow``)."""
    servers = []

    def start(mode: str, delay: float = 5.0) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _FakePrometheus)
        server.mode, server.delay = mode, delay
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def delete_series(devcluster, selector: str) -> None:
    """Tidy the shared Prometheus: drop series a test backfilled (admin API, no restart)."""
    httpx.post(
        f"{devcluster.prometheus_url}/api/v1/admin/tsdb/delete_series",
        params={"match[]": selector},
        timeout=30,
    ).raise_for_status()
