"""deploy/rbac.yaml lets the portal run GPU jobs (read the team's namespace to check it is the
portal's; create and delete Jobs, and patch them to lower a protected borrower's priority
label; follow Jobs, pods and events, and Kueue's Workloads; read logs and Kueue's queues; hold
the watcher's Leases in its own namespace) and no more: it never creates or changes pods, nor
execs into them, nor replaces a Job, nor changes what Kueue decided about a Workload, nor
touches another Lease. Every cluster test of jobs runs with exactly these credentials."""

import pytest
from kubernetes import config

from tests.integration.portal_identity import access_allowed

pytestmark = [pytest.mark.devcluster]

PORTAL_NAMESPACE = "gpu-portal"  # deploy/namespace.yaml's


@pytest.fixture(scope="module")
def portal_api(portal_kubeconfig):
    api = config.new_client_from_config(config_file=str(portal_kubeconfig))
    yield api
    api.close()


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource", "namespace"),
    [
        ("get", "namespaces", "", "", None),
        ("create", "jobs", "batch", "", "any-team"),
        ("delete", "jobs", "batch", "", "any-team"),
        ("patch", "jobs", "batch", "", "any-team"),  # borrower protection's priority label
        ("watch", "jobs", "batch", "", None),
        ("list", "pods", "", "", None),
        ("watch", "pods", "", "", None),
        ("watch", "events", "", "", None),
        ("get", "pods", "", "log", "any-team"),
        # Kueue mode: following Workloads and reading the queues (their usage and positions).
        ("watch", "workloads", "kueue.x-k8s.io", "", None),
        ("list", "clusterqueues", "kueue.x-k8s.io", "", None),
        ("list", "resourceflavors", "kueue.x-k8s.io", "", None),
        ("get", "clusterqueues", "visibility.kueue.x-k8s.io", "pendingworkloads", None),
    ],
)
def test_the_portal_may_do_what_gpu_jobs_need(
    portal_api, verb, resource, group, subresource, namespace
):
    assert access_allowed(
        portal_api, verb, resource, group=group, subresource=subresource, namespace=namespace
    )


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource"),
    [
        ("create", "pods", "", ""),
        ("patch", "pods", "", ""),
        ("create", "pods", "", "exec"),
        ("create", "pods", "", "attach"),
        ("update", "jobs", "batch", ""),
        ("create", "cronjobs", "batch", ""),
        ("create", "events", "", ""),
        ("patch", "workloads", "kueue.x-k8s.io", ""),
        ("update", "workloads", "kueue.x-k8s.io", "status"),
    ],
)
def test_the_portal_may_not_do_more_with_workloads(portal_api, verb, resource, group, subresource):
    assert not access_allowed(
        portal_api, verb, resource, group=group, subresource=subresource, namespace="any-team"
    )


@pytest.mark.parametrize("verb", ["get", "create", "update"])
def test_the_watcher_may_hold_its_leases_in_the_portals_namespace(portal_api, verb):
    """Leader election among watcher replicas (workloads/leader_election.py)."""
    assert access_allowed(
        portal_api, verb, "leases", group="coordination.k8s.io", namespace=PORTAL_NAMESPACE
    )


@pytest.mark.parametrize(
    ("verb", "namespace"),
    [
        ("delete", PORTAL_NAMESPACE),
        ("patch", PORTAL_NAMESPACE),
        ("list", PORTAL_NAMESPACE),
        ("create", "any-team"),
        ("update", "any-team"),
        ("update", "kube-node-lease"),
        ("update", "kube-system"),
    ],
)
def test_the_watcher_may_not_touch_other_leases(portal_api, verb, namespace):
    """No Lease outside the portal's namespace (the nodes' heartbeats, the control plane's own
    leader elections), and none deleted."""
    assert not access_allowed(
        portal_api, verb, "leases", group="coordination.k8s.io", namespace=namespace
    )
