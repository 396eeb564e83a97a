"""deploy/rbac.yaml lets the portal run inference services (apply, list and prune Deployments,
Services and HTTPRoutes; follow Deployments and ReplicaSets) and no more: it never scales a
Deployment behind its own back, changes a ReplicaSet or a pod, or touches a Gateway. Every
devcluster test of services runs with exactly these credentials."""

import pytest
from kubernetes import config

from tests.integration.portal_identity import access_allowed

pytestmark = [pytest.mark.devcluster]


@pytest.fixture(scope="module")
def portal_api(portal_kubeconfig):
    api = config.new_client_from_config(config_file=str(portal_kubeconfig))
    yield api
    api.close()


@pytest.mark.parametrize(
    ("verb", "resource", "group", "namespace"),
    [
        ("patch", "deployments", "apps", "any-team"),
        ("create", "deployments", "apps", "any-team"),
        ("delete", "deployments", "apps", "any-team"),
        ("watch", "deployments", "apps", None),
        ("watch", "replicasets", "apps", None),
        ("patch", "services", "", "any-team"),
        ("delete", "services", "", "any-team"),
        ("patch", "httproutes", "gateway.networking.k8s.io", "any-team"),
        ("list", "httproutes", "gateway.networking.k8s.io", "any-team"),
    ],
)
def test_the_portal_may_do_what_services_need(portal_api, verb, resource, group, namespace):
    assert access_allowed(portal_api, verb, resource, group=group, namespace=namespace)


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource"),
    [
        ("update", "deployments", "apps", ""),
        ("patch", "deployments", "apps", "scale"),
        ("patch", "replicasets", "apps", ""),
        ("delete", "replicasets", "apps", ""),
        ("create", "statefulsets", "apps", ""),
        ("create", "daemonsets", "apps", ""),
        ("update", "services", "", ""),
        ("patch", "services", "", "status"),
        ("create", "gateways", "gateway.networking.k8s.io", ""),
        ("patch", "httproutes", "gateway.networking.k8s.io", "status"),
        ("create", "pods", "", ""),
        ("delete", "pods", "", ""),
    ],
)
def test_the_portal_may_not_do_more_with_services(portal_api, verb, resource, group, subresource):
    assert not access_allowed(
        portal_api, verb, resource, group=group, subresource=subresource, namespace="any-team"
    )
