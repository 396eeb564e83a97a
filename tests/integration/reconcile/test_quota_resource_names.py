"""What the API server does with the two ways of writing a GPU quota.

Kubernetes documents only the ``requests.`` prefix for extended resources in a ResourceQuota.
The seed also wrote ``limits.nvidia.com/gpu``. On the devcluster's kube-apiserver (v1.36.3) that
form is accepted and stored, but the quota controller never counts it and admission never
enforces it: a pod asking for more GPUs than it allows is admitted. So the portal writes only
``requests.<resource>`` (reconcile/manifests.py), which is counted and enforced.
"""

import uuid

import pytest
from kubernetes.client.rest import ApiException

from tests.integration.conftest import wait_for

from .conftest import delete_namespace, gpu_pod

pytestmark = [pytest.mark.devcluster]


@pytest.fixture
def namespace(core):
    name = f"rc-names-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: core.list_namespaced_service_account(name).items, what="the default SA")
    yield name
    delete_namespace(core, name)


def quota(core, namespace, hard):
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "q"}, "spec": {"hard": hard}}
    )
    return wait_for(
        lambda: (q := core.read_namespaced_resource_quota("q", namespace)).status.hard and q,
        what="the quota controller to see the quota",
    )


def test_the_limits_form_is_stored_but_neither_counted_nor_enforced(core, namespace):
    stored = quota(core, namespace, {"limits.nvidia.com/gpu": "2"})
    assert stored.spec.hard == {"limits.nvidia.com/gpu": "2"}

    admitted = core.create_namespaced_pod(namespace, gpu_pod("three-gpus", gpus=3))

    assert admitted.metadata.name == "three-gpus"
    status = core.read_namespaced_resource_quota("q", namespace).status
    assert "limits.nvidia.com/gpu" not in (status.used or {})


def test_the_requests_form_is_counted_and_enforced(core, namespace):
    quota(core, namespace, {"requests.nvidia.com/gpu": "2"})
    wait_for(
        lambda: core.read_namespaced_resource_quota("q", namespace).status.used is not None,
        what="usage to be computed",
    )

    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, gpu_pod("three-gpus", gpus=3))

    assert refused.value.status == 403
    assert "exceeded quota: q" in refused.value.body
    core.create_namespaced_pod(namespace, gpu_pod("two-gpus", gpus=2))
    wait_for(
        lambda: (
            core.read_namespaced_resource_quota("q", namespace).status.used.get(
                "requests.nvidia.com/gpu"
            )
            == "2"
        ),
        what="the two GPUs to be counted",
    )
