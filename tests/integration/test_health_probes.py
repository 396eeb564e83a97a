"""The probes the Helm chart points the kubelet at, on the portal served as the Dockerfile serves
it (DEBUG off, https required, one allowed host): ``/healthz`` and ``/readyz`` answer the kubelet,
which calls the pod's own address over plain http, with the real PostgreSQL and Redis, and
``/readyz`` names what is down when the broker or the database does not answer (a closed port)."""

import httpx
import pytest

from tests.integration.conftest import free_port
from tests.integration.servers import portal_server

# django_db: the session creates the test database only for tests that ask for one.
pytestmark = [pytest.mark.integration, pytest.mark.django_db]

# What the kubelet sends: the pod's address as the host, plain http, no proxy header.
KUBELET = {"Host": "10.244.1.17:8000", "User-Agent": "kube-probe/1.36"}


@pytest.fixture(scope="module")
def server(postgres_database, tmp_path_factory):
    with portal_server(postgres_database, tmp_path_factory.mktemp("health")) as base:
        yield base


def test_healthz_answers_the_kubelet(server):
    response = httpx.get(f"{server}/healthz", headers=KUBELET)

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response.headers["Cache-Control"] == "no-store"


def test_readyz_checks_the_database_and_the_broker(server):
    response = httpx.get(f"{server}/readyz", headers=KUBELET)

    assert response.status_code == 200
    assert response.json() == {"database": "ok", "broker": "ok"}


def test_other_pages_still_refuse_the_unknown_host_and_plain_http(server):
    assert httpx.get(f"{server}/login/", headers=KUBELET).status_code == 400
    redirected = httpx.get(f"{server}/login/")
    assert redirected.status_code == 301
    assert redirected.headers["Location"].startswith("https://")


def test_readyz_names_the_broker_when_it_does_not_answer(postgres_database, tmp_path):
    closed = f"redis://127.0.0.1:{free_port()}/0"
    with portal_server(postgres_database, tmp_path, CELERY_BROKER_URL=closed) as base:
        response = httpx.get(f"{base}/readyz", headers=KUBELET, timeout=15)
        alive = httpx.get(f"{base}/healthz", headers=KUBELET)

    assert response.status_code == 503
    assert response.json() == {"database": "ok", "broker": "unavailable"}
    assert alive.status_code == 200


def test_readyz_names_the_database_when_it_does_not_answer(postgres_database, tmp_path):
    closed = f"postgres://portal@127.0.0.1:{free_port()}/portal?connect_timeout=3"
    with portal_server(postgres_database, tmp_path, DATABASE_URL=closed) as base:
        response = httpx.get(f"{base}/readyz", headers=KUBELET, timeout=15)

    assert response.status_code == 503
    assert response.json() == {"database": "unavailable", "broker": "ok"}
