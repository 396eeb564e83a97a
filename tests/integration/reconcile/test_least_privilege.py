"""deploy/rbac.yaml gives the portal what reconcile and inventory need and nothing more: the
worker in these tests runs with exactly that role, so a missing verb fails the other tests, and
these check that what it must not do is refused."""

import pytest
from kubernetes import client, config

from tests.integration.portal_identity import access_allowed, portal_cluster_role

pytestmark = [pytest.mark.devcluster]


@pytest.fixture(scope="module")
def portal_api(portal_kubeconfig):
    api = config.new_client_from_config(config_file=str(portal_kubeconfig))
    yield api
    api.close()


@pytest.mark.parametrize(
    ("verb", "resource", "group", "name"),
    [
        ("patch", "namespaces", "", None),
        ("create", "namespaces", "", None),
        ("patch", "resourcequotas", "", None),
        ("delete", "limitranges", "", None),
        ("list", "rolebindings", "rbac.authorization.k8s.io", None),
        ("bind", "clusterroles", "rbac.authorization.k8s.io", "gpu-portal-member"),
        ("patch", "networkpolicies", "networking.k8s.io", None),
        ("list", "validatingadmissionpolicies", "admissionregistration.k8s.io", None),
        (
            "patch",
            "validatingadmissionpolicies",
            "admissionregistration.k8s.io",
            "gpu-portal-team-pods",
        ),
        (
            "delete",
            "validatingadmissionpolicybindings",
            "admissionregistration.k8s.io",
            "gpu-portal-team-secrets",
        ),
        (
            "patch",
            "validatingadmissionpolicies",
            "admissionregistration.k8s.io",
            "gpu-portal-team-jobs",
        ),
        (
            "create",
            "validatingadmissionpolicybindings",
            "admissionregistration.k8s.io",
            "gpu-portal-team-queued-templates",
        ),
        ("list", "nodes", "", None),
        ("patch", "nodes", "", None),  # a sharing layout's labels and cordon
        ("patch", "clusterqueues", "kueue.x-k8s.io", None),
        ("delete", "localqueues", "kueue.x-k8s.io", None),
        ("list", "resourceflavors", "kueue.x-k8s.io", None),
        ("create", "workloadpriorityclasses", "kueue.x-k8s.io", None),
        ("patch", "cohorts", "kueue.x-k8s.io", None),
        ("delete", "cohorts", "kueue.x-k8s.io", None),
    ],
)
def test_the_portal_may_do_what_reconcile_and_inventory_need(
    portal_api, verb, resource, group, name
):
    assert access_allowed(portal_api, verb, resource, group=group, namespace="any-team", name=name)


@pytest.mark.parametrize(
    ("verb", "resource", "group", "name"),
    [
        ("escalate", "clusterroles", "rbac.authorization.k8s.io", "admin"),
        ("bind", "clusterroles", "rbac.authorization.k8s.io", "cluster-admin"),
        ("bind", "clusterroles", "rbac.authorization.k8s.io", "admin"),
        ("bind", "clusterroles", "rbac.authorization.k8s.io", "edit"),
        # Its own confinement, and any admission policy but its own.
        (
            "patch",
            "validatingadmissionpolicies",
            "admissionregistration.k8s.io",
            "gpu-portal-confinement",
        ),
        (
            "delete",
            "validatingadmissionpolicies",
            "admissionregistration.k8s.io",
            "gpu-portal-confinement",
        ),
        (
            "delete",
            "validatingadmissionpolicybindings",
            "admissionregistration.k8s.io",
            "gpu-portal-confinement",
        ),
        ("update", "validatingadmissionpolicies", "admissionregistration.k8s.io", None),
        ("create", "mutatingadmissionpolicies", "admissionregistration.k8s.io", None),
        ("create", "validatingwebhookconfigurations", "admissionregistration.k8s.io", None),
        ("create", "clusterrolebindings", "rbac.authorization.k8s.io", None),
        ("create", "roles", "rbac.authorization.k8s.io", None),
        ("get", "secrets", "", None),
        ("update", "resourcequotas", "", None),
        ("update", "nodes", "", None),
        ("delete", "nodes", "", None),
        ("create", "pods", "", None),
        ("update", "clusterqueues", "kueue.x-k8s.io", None),
        # Cohorts are the portal's now (a tree of the departments), but only by apply.
        ("update", "cohorts", "kueue.x-k8s.io", None),
        ("create", "admissionchecks", "kueue.x-k8s.io", None),
    ],
)
def test_the_portal_may_not_do_more(portal_api, verb, resource, group, name):
    assert not access_allowed(
        portal_api, verb, resource, group=group, namespace="any-team", name=name
    )


def test_the_portal_cannot_hand_out_cluster_admin_in_a_namespace(portal_api, core):
    namespace = "default"
    binding = {
        "metadata": {"name": "sneaky"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "x"}],
    }

    with pytest.raises(client.ApiException) as refused:
        client.RbacAuthorizationV1Api(portal_api).create_namespaced_role_binding(namespace, binding)

    assert refused.value.status == 403


def test_the_deployed_role_binds_only_the_three_roles_it_hands_out():
    rules = portal_cluster_role()["rules"]

    (bind,) = [r for r in rules if "bind" in r["verbs"]]
    assert bind["resourceNames"] == ["gpu-portal-lead", "gpu-portal-member", "gpu-portal-viewer"]
    assert not [r for r in rules if "escalate" in r["verbs"] or "*" in r["verbs"]]
