"""The portal's own identity writes only where the portal manages: deploy/portal-confinement.yaml
(installed for these tests' portal identity, as a cluster admin installs it for the portal's
ServiceAccount) refuses, with the portal's own credentials, what its RBAC alone would allow.
The worker of every test in this package runs under it."""

import uuid

import pytest
from django.conf import settings
from kubernetes import client

from clusters.leases import LeaseClient
from tests.integration.kube import delete_namespace, read_or_none
from workloads import leader_election

from .conftest import refusal

pytestmark = [pytest.mark.devcluster]

CONFINED = "the portal may write only in namespaces it manages"
LABELLED = "cluster-wide objects (namespaces included) that carry its label"


def job(name: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.example.com/x:1"}],
                }
            }
        },
    }


@pytest.fixture
def unmanaged_namespace(core):
    """A namespace someone else made (no portal label)."""
    name = f"iso-theirs-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    delete_namespace(core, name)


@pytest.fixture
def managed_namespace(core, isolated_portal):
    """A namespace labelled as the portal's (as its reconcile makes them)."""
    name = f"iso-ours-{uuid.uuid4().hex[:6]}"
    labels = {"app.kubernetes.io/managed-by": isolated_portal.name}
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield name
    delete_namespace(core, name)


def test_the_portal_cannot_create_a_role_binding_in_kube_system(portal_api, isolated_portal):
    # RBAC lets it bind its team roles in any namespace; the confinement does not.
    binding = {
        "metadata": {"name": "portal-was-here"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": f"{isolated_portal.name}-member",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "x"}],
    }

    status, message = refusal(
        client.RbacAuthorizationV1Api(portal_api).create_namespaced_role_binding,
        "kube-system",
        binding,
    )

    assert status == 403
    assert CONFINED in message


def test_the_portal_cannot_relabel_a_namespace_it_does_not_manage(
    portal_api, isolated_portal, unmanaged_namespace, core
):
    labels = {"app.kubernetes.io/managed-by": isolated_portal.name}

    status, message = refusal(
        client.CoreV1Api(portal_api).patch_namespace,
        unmanaged_namespace,
        {"metadata": {"labels": labels}},
    )

    assert status == 403
    assert LABELLED in message
    assert "app.kubernetes.io/managed-by" not in (
        core.read_namespace(unmanaged_namespace).metadata.labels or {}
    )


def test_the_portal_cannot_relabel_default(portal_api, isolated_portal):
    status, _ = refusal(
        client.CoreV1Api(portal_api).patch_namespace,
        "default",
        {"metadata": {"labels": {"app.kubernetes.io/managed-by": isolated_portal.name}}},
    )

    assert status == 403


def test_the_portal_cannot_delete_a_namespace_it_does_not_manage(
    portal_api, unmanaged_namespace, core
):
    status, _ = refusal(client.CoreV1Api(portal_api).delete_namespace, unmanaged_namespace)

    assert status == 403
    namespace = read_or_none(core.read_namespace, unmanaged_namespace)
    assert namespace is not None
    assert namespace.metadata.deletion_timestamp is None


def test_the_portal_cannot_create_jobs_elsewhere(portal_api, unmanaged_namespace):
    status, message = refusal(
        client.BatchV1Api(portal_api).create_namespaced_job, unmanaged_namespace, job("elsewhere")
    )

    assert status == 403
    assert CONFINED in message


def test_the_portal_still_creates_jobs_in_a_namespace_it_manages(portal_api, managed_namespace):
    created = client.BatchV1Api(portal_api).create_namespaced_job(
        managed_namespace, job("at-home"), dry_run="All"
    )

    assert created.metadata.name == "at-home"


def test_the_portal_cannot_create_a_namespace_without_its_label(portal_api):
    status, _ = refusal(
        client.CoreV1Api(portal_api).create_namespace,
        {"metadata": {"name": f"iso-unlabelled-{uuid.uuid4().hex[:6]}"}},
    )

    assert status == 403


@pytest.mark.parametrize("verb", ["patch", "delete"])
def test_the_portal_cannot_change_or_remove_its_confinement(portal_api, isolated_portal, verb):
    admission = client.AdmissionregistrationV1Api(portal_api)
    name = f"{isolated_portal.identity}-confinement"
    policy_call = {
        "patch": lambda: admission.patch_validating_admission_policy(
            name, {"spec": {"failurePolicy": "Ignore"}}
        ),
        "delete": lambda: admission.delete_validating_admission_policy(name),
    }[verb]
    binding_call = {
        "patch": lambda: admission.patch_validating_admission_policy_binding(
            name, {"spec": {"validationActions": ["Audit"]}}
        ),
        "delete": lambda: admission.delete_validating_admission_policy_binding(name),
    }[verb]

    assert refusal(policy_call)[0] == 403
    assert refusal(binding_call)[0] == 403


def test_the_portal_cannot_add_an_admission_policy_of_another_name(portal_api, isolated_portal):
    policy = {
        "metadata": {
            "name": "not-the-portals",
            "labels": {"app.kubernetes.io/managed-by": isolated_portal.name},
        },
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "validations": [{"expression": "false"}],
        },
    }

    status, _ = refusal(
        client.AdmissionregistrationV1Api(portal_api).create_validating_admission_policy, policy
    )

    assert status == 403


def test_the_portal_may_hold_the_watchers_lease_in_its_own_namespace(iso_cluster, k8s):
    """The one write outside the namespaces it manages: the watcher replicas' leader election
    creates and renews a Lease in the portal's own namespace (deploy/rbac.yaml's Role there)."""
    name = f"iso-watcher-{uuid.uuid4().hex[:6]}"
    candidate = leader_election.Candidate(
        LeaseClient.for_cluster(iso_cluster),
        namespace=settings.PORTAL_NAMESPACE,
        name=name,
        me="iso-replica-1",
        lease_seconds=15,
        renew_seconds=5,
    )
    coordination = client.CoordinationV1Api(k8s)
    try:
        assert candidate.step()  # created
        created = coordination.read_namespaced_lease(name, settings.PORTAL_NAMESPACE)
        assert candidate.step()  # renewed: an update at the version read
        renewed = coordination.read_namespaced_lease(name, settings.PORTAL_NAMESPACE)

        assert candidate.leading()
        assert renewed.spec.holder_identity == "iso-replica-1"
        assert renewed.metadata.resource_version != created.metadata.resource_version
    finally:
        coordination.delete_namespaced_lease(name, settings.PORTAL_NAMESPACE)


@pytest.fixture
def gpu_node(core):
    """A node of someone else's (no portal label), as the GPU Operator labelled it."""
    name = f"iso-gpu-{uuid.uuid4().hex[:6]}"
    core.create_node(
        {
            "metadata": {
                "name": name,
                "labels": {"hardware-type": "gpu", "nvidia.com/gpu.product": "NVIDIA-A100"},
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        }
    )
    yield name
    core.delete_node(name)


def test_the_portal_may_set_a_nodes_sharing_labels_and_cordon_it(portal_api, gpu_node, core):
    """What a sharing layout writes: the GPU Operator's sharing labels and the cordon."""
    nodes = client.CoreV1Api(portal_api)

    nodes.patch_node(
        gpu_node,
        {
            "metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}},
            "spec": {"unschedulable": True},
        },
    )
    nodes.patch_node(gpu_node, {"metadata": {"labels": {"nvidia.com/mig.config": None}}})

    node = core.read_node(gpu_node)
    assert node.spec.unschedulable is True
    assert "nvidia.com/mig.config" not in node.metadata.labels


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"labels": {"hardware-type": "cpu"}}},
        {"metadata": {"labels": {"nvidia.com/gpu.product": None}}},
        {"metadata": {"labels": {"team": "mine"}}},
        {"metadata": {"annotations": {"note": "x"}}},
        {"spec": {"taints": []}},
    ],
    ids=["relabel", "unlabel", "new-label", "annotate", "untaint"],
)
def test_the_portal_cannot_change_anything_else_of_a_node(portal_api, gpu_node, core, patch):
    before = core.read_node(gpu_node)

    status, message = refusal(client.CoreV1Api(portal_api).patch_node, gpu_node, patch)

    after = core.read_node(gpu_node)
    assert status == 403
    assert LABELLED in message
    assert after.metadata.labels == before.metadata.labels
    # The node lifecycle controller lifts its own not-ready taint meanwhile; the GPU's stays.
    assert "nvidia.com/gpu" in {taint.key for taint in after.spec.taints or []}
