"""Monitoring against the devcluster's real Prometheus and DCGM simulator.

Each test gets its own namespace (a team's slug) and deletes it afterwards, with its pods. The
portal's cache is off so that a poll sees what Prometheus has now. Nothing here stops or
restarts the shared Prometheus: a Prometheus that is down is a Cluster pointed at a closed port.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests import factories
from tests.integration.monitoring.workloads import create_team_namespace, delete_namespace

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


# --- the portal's side -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _on_postgresql(postgres_database):
    """Monitoring's constraints (one open idle episode per pod) are PostgreSQL's to enforce."""


@pytest.fixture(autouse=True)
def _portal_settings(settings):
    settings.MONITORING_CACHE_SECONDS = 0  # every poll asks Prometheus afresh
    settings.MONITORING_PROMETHEUS_TIMEOUT = 10


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


# --- the cluster's side ------------------------------------------------------------------------


@pytest.fixture
def namespace(core):
    """A fresh namespace for one test, labelled as the portal's for a team of its name (it
    becomes a team's slug), deleted with its pods."""
    name = create_team_namespace(core)
    yield name
    delete_namespace(core, name)


@pytest.fixture
def other_namespace(core):
    name = create_team_namespace(core)
    yield name
    delete_namespace(core, name)


# --- Prometheus that is down, slow or wrong ----------------------------------------------------


class _FakePrometheus(BaseHTTPRequestHandler):
    mode = "error"

    def do_GET(self):
        self.server.authorizations.append(self.headers.get("Authorization"))
        if self.server.mode == "slow":
            time.sleep(self.server.delay)
            return
        if self.server.mode == "empty":
            kind = "matrix" if self.path.startswith("/api/v1/query_range") else "vector"
            answer = {"status": "success", "data": {"resultType": kind, "result": []}}
            status = 200
        else:
            answer = {
                "status": "error",
                "errorType": "execution",
                "error": "out of memory (simulated)",
            }
            status = 422
        body = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_prometheus():
    """``fake_prometheus(mode)``: the URL of a local server that answers every query with an
    error (``error``), with no series (``empty``) or not at all for a while (``slow``). The
    ``Authorization`` header of each query is kept in ``fake_prometheus.authorizations``."""
    servers = []

    def start(mode: str, delay: float = 5.0) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _FakePrometheus)
        server.mode, server.delay = mode, delay
        server.authorizations = start.authorizations
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    start.authorizations = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
