"""The cluster's side of the service tests: the Gateway API's CRDs, waiting for a service's rows
(as the watcher writes them) and for its objects on the devcluster, read as its admin."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from clusters.vocabulary import SERVICE_ID_LABEL
from serving.models import InferenceService, Revision
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import api_client_for

GROUP, VERSION = "gateway.networking.k8s.io", "v1"


@pytest.fixture(scope="session")
def apps(k8s):
    return client.AppsV1Api(k8s)


@pytest.fixture(scope="session")
def custom(k8s):
    return client.CustomObjectsApi(k8s)


@pytest.fixture(scope="session")
def gateway_api(devcluster):
    """The Gateway API's CRDs on the shared devcluster (one started by an older checkout lacks
    them: installed then)."""
    devcluster.ensure_gateway_api()
    return devcluster


def api(user):
    return api_client_for(user)


def deploy(user, team, cluster, **overrides):
    body = {
        "team": team.slug,
        "cluster": cluster.name,
        "name": "llm",
        "image": "registry.example.com/vision/llm-server:2.1",
        "command": ["python", "-m", "serve"],
        "gpus": 1,
        "replicas": 1,
        "port": 8000,
        "probe_path": "/healthz",
    }
    body.update(overrides)
    response = api(user).post("/api/v1/services/", body)
    assert response.status_code == 201, response.data
    return InferenceService.objects.get(pk=response.data["id"])


def act(user, service, action, body=None, *, status=200):
    response = api(user).post(f"/api/v1/services/{service.pk}/{action}/", body or {})
    assert response.status_code == status, response.data
    return response


def revision(service, number) -> Revision:
    return Revision.objects.get(service=service, number=number)


def wait_for_ready(service, number, replicas, *, timeout=90) -> Revision:
    """Until the watcher recorded ``replicas`` ready replicas of revision ``number``."""

    def ready():
        row = revision(service, number)
        return row if row.ready_replicas == replicas and row.desired_replicas == replicas else None

    try:
        return wait_for(ready, timeout=timeout, interval=0.3, what=f"r{number} {replicas} ready")
    except pytest.fail.Exception:
        row = revision(service, number)
        fresh = InferenceService.objects.get(pk=service.pk)
        pytest.fail(
            f"r{number} has {row.ready_replicas}/{row.desired_replicas} ready ({row.reason}: "
            f"{row.message}); the service is {fresh.status}: {fresh.last_error}"
        )


def selector(service) -> str:
    return f"{SERVICE_ID_LABEL}={service.pk}"


def deployments(apps_api, service) -> dict[str, object]:
    found = apps_api.list_namespaced_deployment(service.team.slug, label_selector=selector(service))
    return {d.metadata.name: d for d in found.items}


def services_of(core, service) -> dict[str, object]:
    found = core.list_namespaced_service(service.team.slug, label_selector=selector(service))
    return {s.metadata.name: s for s in found.items}


def route(custom_api, service) -> dict | None:
    try:
        return custom_api.get_namespaced_custom_object(
            GROUP, VERSION, service.team.slug, "httproutes", service.name
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def weights(route_obj) -> list[tuple[str, int]]:
    backends = route_obj["spec"]["rules"][0]["backendRefs"]
    return [(b["name"], b["weight"]) for b in backends]


def wait_for_weights(custom_api, service, expected, *, timeout=60):
    return wait_for(
        lambda: (found := route(custom_api, service)) is not None and weights(found) == expected,
        timeout=timeout,
        what=f"HTTPRoute {service.name} with weights {expected}",
    )


def wait_for_deployments(apps_api, service, expected: dict[str, int], *, timeout=60):
    """Until the service's Deployments are exactly ``expected`` (name -> replicas)."""
    return wait_for(
        lambda: {n: d.spec.replicas for n, d in deployments(apps_api, service).items()} == expected,
        timeout=timeout,
        what=f"Deployments {expected}",
    )
