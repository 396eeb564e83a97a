"""GPU sharing on the devcluster: a MIG node and a time-sliced node labelled as the GPU Operator
labels them, the sharing manager repartitioning a node through its nvidia.com/mig.config label
(and failing when asked to), and the DCGM simulator's series per MIG instance and per pod sharing
a GPU."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from devcluster import gpu_sharing as gs
from tests.integration.conftest import wait_for
from tests.integration.kube import GPU_TOLERATION

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

UTILISATION = "devcluster.gpuportal.io/gpu-util"
SERIES = re.compile(r"^(\w+)\{(.*)\} (\S+)$")


def pod_on(node: str, name: str, resource: str, count: int = 1, utilisation: str = "") -> dict:
    amounts = {resource: str(count), "cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {UTILISATION: utilisation} if utilisation else {},
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 3600,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [GPU_TOLERATION],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/trainer:1",
                    "resources": {"requests": dict(amounts), "limits": dict(amounts)},
                }
            ],
        },
    }


def run_pods(core, namespace, *manifests):
    for manifest in manifests:
        core.create_namespaced_pod(namespace, manifest)
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        wait_for(
            lambda name=name: core.read_namespaced_pod(name, namespace).status.phase == "Running",
            what=f"pod {name} to run",
        )


def scrape(devcluster) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(f"{devcluster.settings.dcgm_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    samples = []
    for line in text.splitlines():
        if match := SERIES.match(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            samples.append((match.group(1), labels, float(match.group(3))))
    return samples


def labelled(core, node: str, labels: dict, annotations: dict | None = None) -> None:
    metadata = {"labels": labels}
    if annotations is not None:
        metadata["annotations"] = annotations
    core.patch_node(node, {"metadata": metadata})


def restore_sharable(core, gpu_sharing) -> None:
    """Back to whole GPUs, no failure asked for."""
    node = gpu_sharing.sharable_node
    labelled(
        core,
        node,
        {gs.MIG_CONFIG_LABEL: gs.MIG_CONFIG_DISABLED},
        {gs.FAIL_ANNOTATION: None, gs.DELAY_ANNOTATION: "0.5"},
    )
    gpu_sharing.wait_for_label(node, gs.MIG_CONFIG_STATE_LABEL, gs.MIG_STATE_SUCCESS)
    gpu_sharing.wait_for_allocatable(node, "nvidia.com/gpu", 2)


def test_the_mig_and_time_sliced_nodes_show_the_operators_labels_and_resources(gpu_sharing):
    mig = gpu_sharing.read_node(gpu_sharing.mig_node)
    shared = gpu_sharing.read_node(gpu_sharing.shared_node)

    assert mig.status.allocatable["nvidia.com/mig-1g.10gb"] == "14"
    assert mig.status.allocatable["nvidia.com/gpu"] == "0"
    assert mig.metadata.labels[gs.MIG_CONFIG_LABEL] == "all-1g.10gb"
    assert mig.metadata.labels[gs.MIG_CONFIG_STATE_LABEL] == "success"
    assert mig.metadata.labels[gs.MIG_STRATEGY_LABEL] == "mixed"
    assert mig.metadata.labels["nvidia.com/mig-1g.10gb.count"] == "14"
    assert mig.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert shared.status.allocatable["nvidia.com/gpu.shared"] == "8"
    assert "nvidia.com/gpu" not in shared.status.allocatable
    assert shared.metadata.labels[gs.DEVICE_PLUGIN_CONFIG_LABEL] == "time-slicing-4"
    assert shared.metadata.labels[gs.GPU_REPLICAS_LABEL] == "4"
    assert shared.metadata.labels[gs.GPU_SHARING_STRATEGY_LABEL] == "time-slicing"
    assert shared.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-SHARED"
    for node in (mig, shared):
        assert node.metadata.labels["hardware-type"] == "gpu"
        assert [t.key for t in node.spec.taints or []] == ["nvidia.com/gpu"]


def test_relabelling_a_node_repartitions_it_and_back(gpu_sharing, core):
    node = gpu_sharing.sharable_node
    try:
        labelled(core, node, {gs.MIG_CONFIG_LABEL: "all-3g.40gb"})

        gpu_sharing.wait_for_label(node, gs.MIG_CONFIG_STATE_LABEL, gs.MIG_STATE_SUCCESS)
        gpu_sharing.wait_for_allocatable(node, "nvidia.com/mig-3g.40gb", 4)
        # The manager writes the node's status and its labels in separate calls.
        read = gpu_sharing.wait_for_label(node, "nvidia.com/mig-3g.40gb.count", "4")
        assert read.status.allocatable["nvidia.com/gpu"] == "0"
        assert read.status.capacity["nvidia.com/mig-3g.40gb"] == "4"
    finally:
        restore_sharable(core, gpu_sharing)
    read = gpu_sharing.read_node(node)
    assert "nvidia.com/mig-3g.40gb" not in read.status.allocatable
    assert "nvidia.com/mig-3g.40gb.count" not in read.metadata.labels


def test_a_failure_annotation_fails_the_change_and_leaves_the_node_as_it_was(gpu_sharing, core):
    node = gpu_sharing.sharable_node
    try:
        labelled(
            core,
            node,
            {gs.MIG_CONFIG_LABEL: "all-balanced"},
            {gs.FAIL_ANNOTATION: "GPU 1 is in use by a process outside Kubernetes"},
        )

        read = gpu_sharing.wait_for_label(node, gs.MIG_CONFIG_STATE_LABEL, gs.MIG_STATE_FAILED)
        assert read.metadata.annotations[gs.ERROR_ANNOTATION] == (
            "GPU 1 is in use by a process outside Kubernetes"
        )
        assert read.status.allocatable["nvidia.com/gpu"] == "2"
        assert not [r for r in read.status.allocatable if r.startswith("nvidia.com/mig-")]
        assert read.metadata.annotations[gs.MIG_APPLIED_ANNOTATION] == "all-disabled"
    finally:
        restore_sharable(core, gpu_sharing)
    assert gs.ERROR_ANNOTATION not in gpu_sharing.read_node(node).metadata.annotations


def test_repartitioning_waits_while_a_gpu_pod_runs_on_the_node(gpu_sharing, core, namespace):
    node = gpu_sharing.sharable_node
    run_pods(core, namespace, pod_on(node, "holder", "nvidia.com/gpu"))
    try:
        labelled(core, node, {gs.MIG_CONFIG_LABEL: "all-7g.80gb"}, {gs.DELAY_ANNOTATION: "0.5"})
        gpu_sharing.wait_for_label(node, gs.MIG_CONFIG_STATE_LABEL, "pending")
        time.sleep(2)
        assert gpu_sharing.read_node(node).status.allocatable["nvidia.com/gpu"] == "2"

        core.delete_namespaced_pod("holder", namespace, grace_period_seconds=0)

        gpu_sharing.wait_for_label(node, gs.MIG_CONFIG_STATE_LABEL, gs.MIG_STATE_SUCCESS)
        gpu_sharing.wait_for_allocatable(node, "nvidia.com/mig-7g.80gb", 2)
    finally:
        restore_sharable(core, gpu_sharing)


def test_dcgm_series_per_mig_instance_and_per_pod_sharing_a_gpu(
    gpu_sharing, devcluster, core, namespace
):
    run_pods(
        core,
        namespace,
        pod_on(gpu_sharing.mig_node, "slice", "nvidia.com/mig-1g.10gb", utilisation="40"),
        pod_on(gpu_sharing.shared_node, "first", "nvidia.com/gpu.shared", utilisation="60"),
        pod_on(gpu_sharing.shared_node, "second", "nvidia.com/gpu.shared", utilisation="30"),
    )

    def ours():
        samples = [s for s in scrape(devcluster) if s[1].get("namespace") == namespace]
        return len(samples) >= 3 + 2 * 6 and samples

    samples = wait_for(ours, timeout=15, interval=0.5, what="the pods' DCGM series")

    slice_series = {m: (labels, v) for m, labels, v in samples if labels["pod"] == "slice"}
    assert set(slice_series) == {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
    }
    labels, engine = slice_series["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert labels["GPU_I_PROFILE"] == "1g.10gb"
    assert labels["GPU_I_ID"] == "0"
    assert labels["gpu"] == "0"
    assert labels["Hostname"] == gpu_sharing.mig_node
    assert labels["UUID"].startswith("GPU-")
    assert engine == pytest.approx(0.4)
    used = slice_series["DCGM_FI_DEV_FB_USED"][1]
    assert used + slice_series["DCGM_FI_DEV_FB_FREE"][1] == 10 * 1024

    shares = {
        labels["pod"]: (labels["gpu"], value)
        for metric, labels, value in samples
        if metric == "DCGM_FI_DEV_GPU_UTIL"
    }
    assert shares == {"first": ("0", 30.0), "second": ("0", 15.0)}
    everything = scrape(devcluster)
    unshared = [
        (labels, value)
        for metric, labels, value in everything
        if metric == "DCGM_FI_DEV_GPU_UTIL"
        and labels["Hostname"] == gpu_sharing.shared_node
        and labels["gpu"] == "1"
    ]
    assert [(("pod" in labels), value) for labels, value in unshared] == [(False, 0.0)]
