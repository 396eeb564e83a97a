"""A node's GPU sharing as the GPU Operator shows it, and the few node writes a sharing layout
needs: its sharing labels and whether it takes new pods (cordon, uncordon).

The readings (``node_gpus``, ``node_sharing``, ``gpu_pods_on``) are pure, over the API's Node
and Pod JSON; ``NodeSharingClient`` reads nodes and the unfinished pods on them and patches a
node's labels and ``spec.unschedulable`` (a JSON merge patch: only those fields, nothing else of
the node). The portal's identity needs ``patch`` on nodes for it (deploy/rbac.yaml), and its
confinement (deploy/portal-confinement.yaml) lets it change only those fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from clusters.inventory import TERMINAL_PHASES, is_gpu_resource, list_gpu_nodes, node_usable, whole
from clusters.kube import KINDS, describe
from clusters.models import Cluster
from clusters.vocabulary import (
    DEFAULT_GPU_RESOURCE,
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_DISABLED,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_RESOURCE_PREFIX,
    SHARED_GPU_RESOURCE,
)
from clusters.workloads import WorkloadClient

# The labels a sharing layout sets on a node, and puts back as they were.
SHARING_LABELS = (MIG_CONFIG_LABEL, DEVICE_PLUGIN_CONFIG_LABEL)
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class PodOnNode:
    """An unfinished pod bound to a node, with the GPUs it asks for by resource name."""

    namespace: str
    name: str
    node: str
    gpus: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeSharing:
    """One GPU node as a sharing layout sees it: its model, whether it takes new pods, its
    allocatable GPUs by resource name, its sharing labels and the MIG manager's state."""

    name: str
    gpu_model: str
    usable: bool
    allocatable: dict[str, int]
    labels: dict[str, str]
    mig_state: str
    unschedulable: bool

    @property
    def whole_gpus(self) -> int:
        return self.allocatable.get(DEFAULT_GPU_RESOURCE, 0)

    @property
    def shared(self) -> bool:
        """Partitioned or time-sliced (or asked to be): not a whole-GPU node."""
        mig = self.labels.get(MIG_CONFIG_LABEL, "")
        return bool(
            (mig and mig != MIG_CONFIG_DISABLED)
            or self.labels.get(DEVICE_PLUGIN_CONFIG_LABEL)
            or any(
                name.startswith(MIG_RESOURCE_PREFIX) or name == SHARED_GPU_RESOURCE
                for name, count in self.allocatable.items()
                if count > 0
            )
        )


def node_sharing(node: dict, *, model_label: str) -> NodeSharing:
    metadata, status = node.get("metadata") or {}, node.get("status") or {}
    labels = metadata.get("labels") or {}
    allocatable = {
        name: count
        for name, quantity in (status.get("allocatable") or {}).items()
        if is_gpu_resource(name) and (count := whole(quantity)) > 0
    }
    return NodeSharing(
        name=metadata.get("name", ""),
        gpu_model=labels.get(model_label, ""),
        usable=node_usable(node),
        allocatable=allocatable,
        labels={key: labels[key] for key in SHARING_LABELS if key in labels},
        mig_state=labels.get(MIG_CONFIG_STATE_LABEL, ""),
        unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
    )


def pod_gpu_requests(pod: dict) -> dict[str, int]:
    """Every GPU resource (whole, MIG, shared, other vendors') the pod's containers ask for."""
    spec = pod.get("spec") or {}
    totals: dict[str, int] = {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            for name, quantity in (resources.get(section) or {}).items():
                if is_gpu_resource(name):
                    totals[name] = max(totals.get(name, 0), whole(quantity))
    return {name: count for name, count in totals.items() if count > 0}


def gpu_pods_on(pods: Iterable[dict], nodes: Iterable[str] | None = None) -> list[PodOnNode]:
    """The unfinished pods bound to the nodes (every node: None) that ask for any GPU."""
    wanted = set(nodes) if nodes is not None else None
    found = []
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (wanted is not None and node not in wanted):
            continue
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        gpus = pod_gpu_requests(pod)
        if gpus:
            metadata = pod.get("metadata") or {}
            found.append(
                PodOnNode(
                    namespace=metadata.get("namespace", ""),
                    name=metadata.get("name", ""),
                    node=node,
                    gpus=gpus,
                )
            )
    return sorted(found, key=lambda p: (p.node, p.namespace, p.name))


class NodeSharingClient(WorkloadClient):
    """Reads a cluster's GPU nodes and the pods on them; patches a node's sharing labels and
    whether it takes new pods."""

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> NodeSharingClient:
        client = super().for_cluster(cluster)
        client.cluster = cluster
        return client

    def gpu_nodes(self) -> list[dict]:
        """The cluster's nodes matching its GPU node selector, as the API's JSON."""
        return list_gpu_nodes(self, self.cluster)

    def node(self, name: str) -> dict | None:
        return self.get("Node", name)

    def unfinished_pods(self) -> list[dict]:
        """Every pod of the cluster that has not finished (the nodes' GPU holders among them)."""
        return self.list_objects("Pod", field_selector=UNFINISHED_PODS).items

    def patch_node(
        self,
        name: str,
        *,
        labels: dict[str, str | None] | None = None,
        unschedulable: bool | None = None,
    ) -> dict:
        """Set (or with None remove) the node's ``labels`` and set ``spec.unschedulable``: a
        merge patch of those fields only. Raises ``KubeError`` (``NotFound``: no such node)."""
        body: dict = {}
        if labels:
            body["metadata"] = {"labels": dict(labels)}
        if unschedulable is not None:
            body["spec"] = {"unschedulable": unschedulable}
        return self._call(
            "PATCH",
            KINDS["Node"].path(name=name),
            what=describe("Node", name),
            body=body,
            content_type="application/merge-patch+json",
        )
