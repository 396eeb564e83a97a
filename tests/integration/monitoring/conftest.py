"""Monitoring against the devcluster's real Prometheus and DCGM simulator.

Each test gets its own namespace (a team's slug) and deletes it afterwards, with its pods. The
portal's cache is off so that a poll sees what Prometheus has now. Nothing here stops or
restarts the shared Prometheus: one that is down, slow or wrong is a Prometheus of the test's own
(``start_prometheus``) or a closed port.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from tests import factories
from tests.integration.monitoring.workloads import (
    OwnPrometheus,
    create_team_namespace,
    delete_namespace,
)

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
def shared_cache(settings):
    """Django's cache in the suite's Redis, as production runs it (keys under a prefix of this
    test's own, deleted afterwards), answers kept for a minute; the environment another process
    needs to share it."""
    url = f"{settings.CELERY_BROKER_URL.rsplit('/', 1)[0]}/1"
    prefix = f"test-{uuid.uuid4().hex}"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": prefix,
        }
    }
    settings.MONITORING_CACHE_SECONDS = 60
    yield {
        "DJANGO_CACHE_URL": url,
        "DJANGO_CACHE_KEY_PREFIX": prefix,
        "MONITORING_CACHE_SECONDS": "60",
    }
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    client.close()


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


# --- a Prometheus of the test's own ------------------------------------------------------------


@pytest.fixture
def start_prometheus(tmp_path):
    """``start_prometheus(*flags, running=True)``: Debian's Prometheus of this test's own, with
    those command-line flags, scraping itself; stopped (resumed first) when the test ends."""
    started = []

    def start(*flags: str, running: bool = True) -> OwnPrometheus:
        directory = tmp_path / f"prometheus-{len(started)}"
        directory.mkdir()
        prometheus = OwnPrometheus(directory, flags=flags)
        started.append(prometheus)
        if running:
            prometheus.start()
        return prometheus

    yield start
    for prometheus in started:
        if prometheus.process is not None and prometheus.process.poll() is None:
            prometheus.resume()
            prometheus.stop()
