"""The pure parts of clusters.inventory (GPUs allocatable vs allocated per node) and of
clusters.pods (what stopping a pod deletes, and which pods the portal may stop)."""

import pytest

from clusters import inventory
from clusters.pods import Stopped, StopRefused, stop_target
from clusters.vocabulary import MANAGED_BY_LABEL


def node(name, gpus, model="NVIDIA-A100", ready=True, resource="nvidia.com/gpu"):
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": model}},
        "status": {
            "allocatable": {resource: str(gpus), "cpu": "96"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(node_name, gpus, phase="Running", init_gpus=0):
    def container(n):
        return {"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(n)}}}

    spec = {"nodeName": node_name, "containers": [container(gpus), {"name": "cpu"}]}
    if init_gpus:
        spec["initContainers"] = [container(init_gpus)]
    return {"spec": spec, "status": {"phase": phase}}


def summarise(nodes, pods, resources=("nvidia.com/gpu",)):
    return inventory.summarise_nodes(
        nodes, pods, resource_names=list(resources), model_label="nvidia.com/gpu.product"
    )


def test_allocated_sums_the_gpu_limits_of_unfinished_pods_on_each_node():
    nodes = summarise(
        [node("b", 8), node("a", 4)],
        [pod("a", 2), pod("a", 1), pod("b", 8, phase="Succeeded"), pod("b", 3, phase="Pending")],
    )
    assert [(n.name, n.gpus_allocatable, n.gpus_allocated) for n in nodes] == [
        ("a", 4, 3),
        ("b", 8, 3),
    ]
    assert nodes[0].gpu_model == "NVIDIA-A100"


def test_nodes_without_gpus_are_left_out_and_readiness_is_reported():
    nodes = summarise([node("cpu", 0), node("gpu", 8, ready=False)], [])
    assert [(n.name, n.ready) for n in nodes] == [("gpu", False)]


def test_an_init_container_asking_for_more_gpus_than_the_others_sets_the_pods_share():
    (summary,) = summarise([node("a", 8)], [pod("a", 1, init_gpus=4)])
    assert summary.gpus_allocated == 4


def test_each_gpu_resource_name_is_counted_on_its_own():
    mig = "nvidia.com/mig-1g.10gb"
    (summary,) = summarise(
        [node("a", 7, resource=mig)],
        [{"spec": {"nodeName": "a", "containers": [{"resources": {"limits": {mig: "2"}}}]}}],
        resources=("nvidia.com/gpu", mig),
    )
    assert summary.allocatable == {mig: 7}
    assert summary.allocated == {mig: 2}


def managed_pod(owner_kind=None, managed_by="gpu-portal"):
    metadata = {"name": "train-0", "labels": {MANAGED_BY_LABEL: managed_by}}
    if owner_kind:
        metadata["ownerReferences"] = [
            {"kind": owner_kind, "name": "job-7", "apiVersion": "batch/v1"}
        ]
    return {"metadata": metadata}


def test_a_pod_owned_by_a_job_is_stopped_by_deleting_the_job():
    assert stop_target(managed_pod("Job"), managed_by="gpu-portal") == (
        Stopped(kind="Job", name="job-7")
    )


def test_a_bare_pod_is_stopped_by_deleting_it():
    assert stop_target(managed_pod(), managed_by="gpu-portal") == (
        Stopped(kind="Pod", name="train-0")
    )


def test_pods_without_the_portals_label_are_never_stopped():
    with pytest.raises(StopRefused, match="only stops what it created"):
        stop_target(managed_pod("Job", managed_by="someone-else"), managed_by="gpu-portal")


def test_the_job_to_delete_is_that_very_job():
    pod = managed_pod("Job")
    pod["metadata"]["ownerReferences"][0]["uid"] = "uid-7"
    assert stop_target(pod, managed_by="gpu-portal").uid == "uid-7"
