"""What a cluster's GPU nodes offer and hold: the node inventory.

Pure arithmetic over the API's Node and Pod JSON (which nodes count, how many GPUs of each
resource name they offer, how many their pods ask for), tested without a cluster, and
``gpu_nodes``, the one read that lists them through ``clusters.workloads``. The capacity sync
(``clusters.capacity``) and the cluster dashboard (``monitoring.dashboards``) build on it.

Only nodes that can take new pods count towards capacity: Ready and not cordoned. A node that
disappears, goes NotReady or is cordoned lowers the capacity the portal plans with; one that
comes back raises it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clusters.kube import KubeClient, selector
from clusters.models import Cluster
from clusters.vocabulary import (
    DEFAULT_GPU_RESOURCE,
    GPU_REPLICAS_LABEL,
    GPU_RESOURCE_PREFIXES,
    SHARED_GPU_RESOURCE,
)
from clusters.workloads import WorkloadClient

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class GpuKind:
    """GPUs of one resource name across the usable nodes, and the models they are."""

    resource_name: str
    allocatable: int = 0
    models: set[str] = field(default_factory=set)
    nodes: int = 0

    @property
    def gpu_model(self) -> str:
        """The model label's values, sorted and joined: one model in a uniform pool."""
        return ", ".join(sorted(self.models))[:200]


def is_gpu_resource(name: str, known: Iterable[str] = ()) -> bool:
    return name in set(known) or name.startswith(GPU_RESOURCE_PREFIXES)


def node_usable(node: dict) -> bool:
    """Ready and schedulable: a node the scheduler may put a new GPU pod on."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def whole(value) -> int:
    """A GPU count from an allocatable quantity ("8"); anything else counts as none."""
    try:
        return max(int(str(value)), 0)
    except (TypeError, ValueError):
        return 0


def gpu_inventory(
    nodes: Iterable[dict], *, model_label: str, known_resources: Iterable[str] = ()
) -> dict[str, GpuKind]:
    """Allocatable GPUs per resource name over the usable nodes, with the models seen."""
    known = list(known_resources)
    kinds: dict[str, GpuKind] = {}
    for node in nodes:
        if not node_usable(node):
            continue
        labels = (node.get("metadata") or {}).get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for name, quantity in allocatable.items():
            gpus = whole(quantity)
            if gpus <= 0 or not is_gpu_resource(name, known):
                continue
            kind = kinds.setdefault(name, GpuKind(resource_name=name))
            kind.allocatable += gpus
            kind.nodes += 1
            if labels.get(model_label):
                kind.models.add(labels[model_label])
    return kinds


@dataclass
class ModelGpus:
    """GPUs of one model (the node label's value) under one resource name: over the usable
    nodes, how many there are, how many such nodes, and the most one of them offers (the
    largest job that fits on one node), and for shared GPUs the replicas each GPU is split into
    (the most any of its nodes says; 1 otherwise)."""

    resource_name: str
    gpu_model: str
    allocatable: int = 0
    nodes: int = 0
    max_per_node: int = 0
    replicas: int = 1


def gpu_model_inventory(
    nodes: Iterable[dict], *, model_label: str, known_resources: Iterable[str] = ()
) -> dict[tuple[str, str], ModelGpus]:
    """Per (resource name, GPU model): what the usable nodes of that model offer.

    Every model that a node offering GPUs carries is there, usable or not: a model whose nodes
    are all NotReady or cordoned for a while stays, at 0, so what is planned per model (and
    Kueue's flavor of it) outlives a maintenance window. A model no node carries is absent.
    Nodes without the model label count towards no model.
    """
    known = list(known_resources)
    models: dict[tuple[str, str], ModelGpus] = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        model = labels.get(model_label) or ""
        if not model:
            continue
        usable = node_usable(node)
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for name, quantity in allocatable.items():
            if not is_gpu_resource(name, known):
                continue
            gpus = whole(quantity)
            row = models.setdefault((name, model), ModelGpus(resource_name=name, gpu_model=model))
            if usable and gpus > 0:
                row.allocatable += gpus
                row.nodes += 1
                row.max_per_node = max(row.max_per_node, gpus)
            if name == SHARED_GPU_RESOURCE:
                row.replicas = max(row.replicas, gpu_replicas(labels))
    return models


def gpu_replicas(labels: dict) -> int:
    """Replicas per GPU a node's ``nvidia.com/gpu.replicas`` label says (1 when absent or not
    a whole number)."""
    return max(whole(labels.get(GPU_REPLICAS_LABEL)), 1)


def shared_gpu_replicas(nodes: Iterable[dict]) -> dict[str, int]:
    """Node name -> replicas per GPU for the nodes offering shared GPUs split into more than
    one replica, usable or not (their DCGM history stays theirs while they are cordoned)."""
    shared = {}
    for node in nodes:
        metadata = node.get("metadata") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        replicas = gpu_replicas(metadata.get("labels") or {})
        if whole(allocatable.get(SHARED_GPU_RESOURCE)) > 0 and replicas > 1:
            shared[metadata["name"]] = replicas
    return dict(sorted(shared.items()))


@dataclass(frozen=True)
class NodeGpus:
    """One GPU node: its model, whether it takes new pods, and per GPU resource name how many
    GPUs it offers (allocatable) and how many its unfinished pods ask for (allocated)."""

    name: str
    gpu_model: str
    ready: bool
    allocatable: dict[str, int] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)

    @property
    def gpus_allocatable(self) -> int:
        return sum(self.allocatable.values())

    @property
    def gpus_allocated(self) -> int:
        return sum(self.allocated.values())


def pod_gpus(pod: dict, resource_names: Sequence[str]) -> dict[str, int]:
    """GPUs a pod asks for per resource name: its containers' sum, or an init container's if
    larger (init containers run one at a time, before the others)."""
    spec = pod.get("spec") or {}

    def asked(container: dict, name: str) -> int:
        resources = container.get("resources") or {}
        return whole(
            (resources.get("limits") or {}).get(name) or (resources.get("requests") or {}).get(name)
        )

    totals = {}
    for name in resource_names:
        running = sum(asked(c, name) for c in spec.get("containers") or [])
        init = max((asked(c, name) for c in spec.get("initContainers") or []), default=0)
        if max(running, init):
            totals[name] = max(running, init)
    return totals


def summarise_nodes(
    nodes: Iterable[dict], pods: Iterable[dict], *, resource_names: Sequence[str], model_label: str
) -> list[NodeGpus]:
    """Nodes with any GPU of ``resource_names`` allocatable, each with the GPUs its bound,
    unfinished pods ask for. Pure: takes the API's JSON items."""
    allocated: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        held = allocated.setdefault(node, {})
        for name, gpus in pod_gpus(pod, resource_names).items():
            held[name] = held.get(name, 0) + gpus
    summaries = []
    for node in nodes:
        metadata, status = node.get("metadata") or {}, node.get("status") or {}
        offered = {
            name: gpus
            for name in resource_names
            if (gpus := whole((status.get("allocatable") or {}).get(name))) > 0
        }
        if offered:
            summaries.append(
                NodeGpus(
                    name=metadata["name"],
                    gpu_model=(metadata.get("labels") or {}).get(model_label, ""),
                    ready=node_usable(node),
                    allocatable=offered,
                    allocated=allocated.get(metadata["name"], {}),
                )
            )
    return sorted(summaries, key=lambda n: n.name)


def gpu_resource_names(cluster: Cluster) -> list[str]:
    """The GPU resource names the cluster is known to offer (nvidia.com/gpu at least)."""
    names = set(cluster.gpu_capacities.values_list("resource_name", flat=True))
    return sorted(names | {DEFAULT_GPU_RESOURCE})


def list_gpu_nodes(kube: KubeClient, cluster: Cluster) -> list[dict]:
    """The cluster's nodes that match its GPU node selector (every node when it has none), as
    the API's JSON. Raises ``KubeError``."""
    return kube.list("Node", label_selector=selector(cluster.gpu_node_selector or {}) or None)


def gpu_nodes(
    cluster: Cluster,
    *,
    kube: WorkloadClient | None = None,
    resource_names: Sequence[str] | None = None,
) -> list[NodeGpus]:
    """The cluster's GPU nodes (by its GPU node selector) with allocatable and allocated GPUs.
    Raises ``KubeError``. Given its ``resource_names`` (``gpu_resource_names``), it reads only
    the cluster, not the database, so it may run in another thread."""
    if resource_names is None:
        resource_names = gpu_resource_names(cluster)
    kube = kube or WorkloadClient.for_cluster(cluster)
    nodes = list_gpu_nodes(kube, cluster)
    pods = kube.list_objects(
        "Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed"
    ).items
    return summarise_nodes(
        nodes, pods, resource_names=resource_names, model_label=cluster.gpu_model_label
    )
