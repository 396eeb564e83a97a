"""Simulated nodes: Node objects that kwok keeps Ready and whose pods it runs.

A node is simulated by kwok when it carries the annotation kwok.x-k8s.io/node=fake. Every node the
devcluster creates is also labelled devcluster.gpuportal.io/managed=true so that it can be found
and reconciled without touching anything else.

A node may also be shaped by GPU sharing (``NodeSpec.sharing``): MIG partitions or time-sliced
GPUs, labelled as NVIDIA's GPU Operator labels them (``devcluster.gpu_sharing``). Such nodes carry
SHARING_NODE_LABEL too; ``reconcile`` creates them when wanted and missing but never deletes or
recreates them (the ``gpu_sharing`` fixture and the sharing manager own them), while ``recreate``
(a fresh start) replaces them with every other managed node.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from kubernetes import client
from kubernetes.client.rest import ApiException

from devcluster import gpu_sharing
from devcluster.gpu_models import DEFAULT_GPU_MODEL, DEFAULT_SECOND_GPU_MODEL, model_for
from devcluster.versions import KUBERNETES_VERSION

MANAGED_LABEL = "devcluster.gpuportal.io/managed"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
DEFAULT_GPUS_PER_NODE = 8
SHARING_NODE_LABEL = "devcluster.gpuportal.io/sharing-node"
# The nodes `up --sharing` and the tests' `gpu_sharing` fixture add beside the default ones.
MIG_NODE = "gpu-node-mig-0"
SHARED_NODE = "gpu-node-shared-0"
SHARABLE_NODE = "gpu-node-sharable-0"


@dataclass(frozen=True)
class Sharing:
    """The GPU Operator's configs a node starts with: the MIG manager's (mixed strategy) and the
    device plugin's ("" = no sharing)."""

    mig_config: str = gpu_sharing.MIG_CONFIG_DISABLED
    device_plugin_config: str = ""


@dataclass(frozen=True)
class NodeSpec:
    """What one simulated node looks like."""

    name: str
    gpus: int = 0
    gpu_model: str = DEFAULT_GPU_MODEL
    cpu: str = "96"
    memory: str = "1Ti"
    pods: str = "110"
    extra_labels: dict[str, str] = field(default_factory=dict)
    # None: a plain GPU node without the operator's sharing labels (every default node)
    sharing: Sharing | None = None

    def to_manifest(self) -> dict:
        """The Node object, status included (the apiserver accepts node status on create)."""
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            MANAGED_LABEL: "true",
            "hardware-type": "gpu" if self.gpus else "cpu",
        }
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        taints = []
        if self.gpus:
            model = model_for(self.gpu_model)
            labels.update(
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": model.product_label,
                    "nvidia.com/gpu.count": str(self.gpus),
                    "nvidia.com/gpu.memory": str(model.memory_mib),
                }
            )
            resources[GPU_RESOURCE] = str(self.gpus)
            taints.append(dict(GPU_TAINT))
        annotations = {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}
        if self.gpus and self.sharing is not None:
            self._apply_sharing(labels, resources, annotations)
        labels.update(self.extra_labels)
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": {"taints": taints},
            "status": {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": KUBERNETES_VERSION,
                },
            },
        }

    def _apply_sharing(self, labels: dict, resources: dict, annotations: dict) -> None:
        """The labels, GPU resources and applied-config annotations of a sharing node."""
        sharing = self.sharing
        mig_capable = bool(gpu_sharing.profiles_for(self.gpu_model))
        mig_config = sharing.mig_config if mig_capable else None
        shape = gpu_sharing.node_shape(
            model_for(self.gpu_model).product_label,
            self.gpus,
            mig_config,
            sharing.device_plugin_config,
        )
        del resources[GPU_RESOURCE]
        resources.update(shape.resources)
        labels.update(shape.labels)
        labels[SHARING_NODE_LABEL] = "true"
        if mig_capable:
            labels[gpu_sharing.MIG_STRATEGY_LABEL] = "mixed"
            labels[gpu_sharing.MIG_CONFIG_LABEL] = sharing.mig_config
            labels[gpu_sharing.MIG_CONFIG_STATE_LABEL] = gpu_sharing.MIG_STATE_SUCCESS
            annotations[gpu_sharing.MIG_APPLIED_ANNOTATION] = sharing.mig_config
        if sharing.device_plugin_config:
            labels[gpu_sharing.DEVICE_PLUGIN_CONFIG_LABEL] = sharing.device_plugin_config
        annotations[gpu_sharing.DEVICE_PLUGIN_APPLIED_ANNOTATION] = sharing.device_plugin_config


def sharing_node_specs(gpu_model: str = DEFAULT_GPU_MODEL, gpus: int = 2) -> list[NodeSpec]:
    """The GPU sharing nodes: MIG_NODE (every GPU as 7 x 1g.10gb on an A100-80GB), SHARED_NODE
    (every GPU as 4 time-slicing replicas) and SHARABLE_NODE (whole GPUs, to repartition)."""
    smallest = min(gpu_sharing.profiles_for(gpu_model).values(), key=lambda p: p.memory_gb)
    return [
        NodeSpec(
            MIG_NODE,
            gpus=gpus,
            gpu_model=gpu_model,
            sharing=Sharing(mig_config=f"all-{smallest.name}"),
        ),
        NodeSpec(
            SHARED_NODE,
            gpus=gpus,
            gpu_model=gpu_model,
            sharing=Sharing(device_plugin_config=f"{gpu_sharing.TIME_SLICING_CONFIG_PREFIX}4"),
        ),
        NodeSpec(SHARABLE_NODE, gpus=gpus, gpu_model=gpu_model, sharing=Sharing()),
    ]


def default_node_specs(
    gpu_nodes: int,
    cpu_nodes: int,
    gpu_model: str = DEFAULT_GPU_MODEL,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    *,
    second_gpu_nodes: int = 0,
    second_gpu_model: str = DEFAULT_SECOND_GPU_MODEL,
) -> list[NodeSpec]:
    """The standard node set: gpu-node-0.. of the first model, gpu-node-<model>-0.. of the
    second (gpu-node-h100-0 for NVIDIA-H100-80GB-HBM3), each with gpus_per_node GPUs, then
    cpu-node-0.."""
    specs = [
        NodeSpec(name=f"gpu-node-{index}", gpus=gpus_per_node, gpu_model=gpu_model)
        for index in range(gpu_nodes)
    ]
    short = short_model_name(second_gpu_model)
    specs += [
        NodeSpec(name=f"gpu-node-{short}-{index}", gpus=gpus_per_node, gpu_model=second_gpu_model)
        for index in range(second_gpu_nodes)
    ]
    specs += [NodeSpec(name=f"cpu-node-{index}") for index in range(cpu_nodes)]
    return specs


def short_model_name(product_label: str) -> str:
    """The model part of a product label, fit for a node name: NVIDIA-H100-80GB-HBM3 -> h100,
    Tesla-T4 -> t4."""
    parts = [part for part in re.split(r"[^A-Za-z0-9]+", product_label) if part]
    return (parts[1] if len(parts) > 1 else parts[0] if parts else "gpu").lower()


def is_ready(node: client.V1Node) -> bool:
    """Ready condition True and the not-ready taint, added at registration, already removed."""
    conditions = node.status.conditions or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    taints = node.spec.taints or []
    not_ready_taint = any(t.key.startswith("node.kubernetes.io/not-ready") for t in taints)
    return ready and not not_ready_taint


def create_node(api: client.ApiClient, spec: NodeSpec) -> None:
    """Create one simulated node."""
    client.CoreV1Api(api).create_node(spec.to_manifest())


def delete_node(api: client.ApiClient, name: str) -> None:
    """Delete a node; deleting one that is already gone is not an error."""
    try:
        client.CoreV1Api(api).delete_node(name)
    except ApiException as error:
        if error.status != 404:
            raise


def managed_node_names(api: client.ApiClient, sharing: bool = True) -> list[str]:
    """The managed nodes' names; without the sharing nodes when sharing is false."""
    selector = f"{MANAGED_LABEL}=true" + ("" if sharing else f",!{SHARING_NODE_LABEL}")
    nodes = client.CoreV1Api(api).list_node(label_selector=selector)
    return sorted(node.metadata.name for node in nodes.items)


def wait_for_ready(api: client.ApiClient, names: list[str], timeout: float = 60.0) -> None:
    """Wait until every named node is Ready for scheduling."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        for name in sorted(pending):
            try:
                if is_ready(core.read_node(name)):
                    pending.discard(name)
            except ApiException as error:
                if error.status != 404:
                    raise
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not Ready after {timeout:.0f}s: {sorted(pending)}")
        time.sleep(0.2)


def wait_for_deleted(api: client.ApiClient, name: str, timeout: float = 30.0) -> None:
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.read_node(name)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        time.sleep(0.2)
    raise TimeoutError(f"node {name} still present after {timeout:.0f}s")


def reconcile(api: client.ApiClient, specs: list[NodeSpec]) -> None:
    """Make the managed nodes exactly `specs`: create missing ones, recreate changed ones and
    delete managed nodes that are not wanted. Sharing nodes (SHARING_NODE_LABEL) are only
    created when missing: never deleted, nor recreated because the sharing manager (or a test)
    changed their shape."""
    core = client.CoreV1Api(api)
    wanted = {spec.name: spec for spec in specs}
    for name in managed_node_names(api, sharing=False):
        if name not in wanted:
            delete_node(api, name)
    for spec in specs:
        manifest = spec.to_manifest()
        try:
            existing = core.read_node(spec.name)
        except ApiException as error:
            if error.status != 404:
                raise
            create_node(api, spec)
            continue
        if (existing.metadata.labels or {}).get(SHARING_NODE_LABEL) == "true":
            continue
        wanted_labels = manifest["metadata"]["labels"].items()
        wanted_gpus = manifest["status"]["allocatable"].get(GPU_RESOURCE)
        same_shape = wanted_labels <= (existing.metadata.labels or {}).items() and (
            (existing.status.allocatable or {}).get(GPU_RESOURCE) == wanted_gpus
        )
        if not same_shape:
            delete_node(api, spec.name)
            wait_for_deleted(api, spec.name)
            create_node(api, spec)
    wait_for_ready(api, [spec.name for spec in specs])


def recreate(api: client.ApiClient, specs: list[NodeSpec]) -> None:
    """Replace every managed node with a fresh one from `specs`.

    Used when the cluster starts from an existing etcd: the old Node objects carry the heartbeats
    of the previous run, and the node lifecycle controller would first mark them NotReady.
    """
    old = managed_node_names(api)
    for name in old:
        delete_node(api, name)
    for name in old:
        wait_for_deleted(api, name)
    for spec in specs:
        create_node(api, spec)
    wait_for_ready(api, [spec.name for spec in specs])
