"""ResourceQuota on nvidia.com/gpu is enforced by the real apiserver and tracked by the
controller manager."""

import pytest
from kubernetes.client.rest import ApiException

from tests.integration.conftest import wait_for
from tests.integration.kube import gpu_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


@pytest.fixture
def gpu_quota(core, namespace):
    core.create_namespaced_resource_quota(
        namespace,
        {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
    )
    # The apiserver only admits pods against a quota once the controller has computed its usage.
    wait_for(
        lambda: core.read_namespaced_resource_quota("gpus", namespace).status.used is not None,
        what="the quota controller to compute initial usage",
    )
    return "gpus"


def test_a_pod_asking_for_more_gpus_than_the_quota_allows_is_refused_with_exceeded_quota(
    core, namespace, gpu_quota
):
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, gpu_pod("greedy", gpus=3))

    assert refused.value.status == 403
    assert "exceeded quota: gpus" in refused.value.body
    assert "requests.nvidia.com/gpu=3" in refused.value.body


def test_gpu_quota_usage_shows_in_the_resource_quota_status(core, namespace, gpu_quota):
    core.create_namespaced_pod(namespace, gpu_pod("modest", gpus=2))

    quota = wait_for(
        lambda: (
            (q := core.read_namespaced_resource_quota(gpu_quota, namespace)).status.used.get(
                "requests.nvidia.com/gpu"
            )
            == "2"
            and q
        ),
        what="quota usage of 2 GPUs",
    )
    assert quota.status.hard["requests.nvidia.com/gpu"] == "2"

    with pytest.raises(ApiException, match="exceeded quota"):
        core.create_namespaced_pod(namespace, gpu_pod("one-more", gpus=1))
