"""GPU pods are placed by the real scheduler onto simulated GPU nodes, or refused a place."""

import pytest

from tests.integration.conftest import wait_for
from tests.integration.kube import gpu_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


def test_a_gpu_pod_with_the_gpu_affinity_and_toleration_lands_on_a_gpu_node_and_runs(
    core, namespace
):
    core.create_namespaced_pod(namespace, gpu_pod("trainer", gpus=2))

    pod = wait_for(
        lambda: (
            (p := core.read_namespaced_pod("trainer", namespace)).status.phase == "Running" and p
        ),
        what="the GPU pod to reach Running",
    )

    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["hardware-type"] == "gpu"
    assert node.status.allocatable["nvidia.com/gpu"] == "8"


def test_a_pod_asking_for_more_gpus_than_any_node_has_stays_pending_as_unschedulable(
    core, namespace
):
    core.create_namespaced_pod(namespace, gpu_pod("too-big", gpus=16))

    def failed_scheduling_event():
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=too-big,reason=FailedScheduling"
        ).items
        return events[0] if events else None

    event = wait_for(failed_scheduling_event, what="a FailedScheduling event")
    assert "nvidia.com/gpu" in event.message

    pod = core.read_namespaced_pod("too-big", namespace)
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")


def test_a_cpu_pod_without_the_toleration_never_lands_on_a_gpu_node(core, namespace):
    pod = {
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "main", "image": "registry.example/web:1"}]},
    }
    core.create_namespaced_pod(namespace, pod)

    running = wait_for(
        lambda: (p := core.read_namespaced_pod("web", namespace)).status.phase == "Running" and p,
        what="the CPU pod to reach Running",
    )

    node = core.read_node(running.spec.node_name)
    assert node.metadata.labels["hardware-type"] == "cpu"


def test_a_gpu_node_added_at_runtime_takes_pods_and_can_be_removed(devcluster, core, namespace):
    name = devcluster.add_gpu_node(gpus=4, labels={"pool": namespace})
    try:
        node = core.read_node(name)
        assert node.status.allocatable["nvidia.com/gpu"] == "4"
        pod = gpu_pod("pinned", gpus=4)
        pod["spec"]["nodeSelector"] = {"pool": namespace}
        core.create_namespaced_pod(namespace, pod)
        wait_for(
            lambda: core.read_namespaced_pod("pinned", namespace).status.phase == "Running",
            what="the pod on the new node to run",
        )
        assert core.read_namespaced_pod("pinned", namespace).spec.node_name == name
    finally:
        devcluster.remove_node(name)

    assert name not in [n.metadata.name for n in core.list_node().items]
