"""Monitoring's reads of a cluster, and its one guarded delete: the GPU nodes with the GPUs
their pods hold, and stopping an idle pod the portal itself created.

Everything goes through ``clusters.kube`` / ``clusters.workloads`` (one connection per cluster,
failures as ``KubeError`` with a message a person can act on). What the API returns is
summarised by pure functions, tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.conf import settings

from clusters.capacity import node_usable, whole
from clusters.kube import KubeError, selector
from clusters.models import Cluster
from clusters.workloads import WorkloadClient

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
TERMINAL_PHASES = ("Succeeded", "Failed")

__all__ = ["KubeError", "NodeGpus", "StopRefused", "Stopped", "gpu_nodes", "stop_managed_pod"]


class StopRefused(Exception):
    """The pod is not the portal's to stop (or is already gone)."""


# --- GPU nodes -------------------------------------------------------------------------------


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


def _pod_gpus(pod: dict, resource_names: Sequence[str]) -> dict[str, int]:
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
        for name, gpus in _pod_gpus(pod, resource_names).items():
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


def gpu_nodes(cluster: Cluster, *, kube: WorkloadClient | None = None) -> list[NodeGpus]:
    """The cluster's GPU nodes (by its GPU node selector) with allocatable and allocated GPUs.
    Raises ``KubeError``."""
    kube = kube or WorkloadClient.for_cluster(cluster)
    nodes = kube.list("Node", label_selector=selector(cluster.gpu_node_selector or {}) or None)
    pods = kube.list_objects(
        "Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed"
    ).items
    return summarise_nodes(
        nodes, pods, resource_names=gpu_resource_names(cluster), model_label=cluster.gpu_model_label
    )


# --- stopping a pod the portal created ------------------------------------------------------


@dataclass(frozen=True)
class Stopped:
    """What was (or would be) deleted to stop a pod: its owning Job, or the pod itself."""

    kind: str
    name: str
    uid: str = ""


def stop_target(pod: dict, *, managed_by: str) -> Stopped:
    """What to delete to stop this pod: its Job when a Job owns it (deleting only the pod would
    make the Job start another), else the pod. Refuses pods without the portal's label."""
    metadata = pod.get("metadata") or {}
    if (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != managed_by:
        raise StopRefused(
            f"Pod {metadata.get('name')} is not labelled {MANAGED_BY_LABEL}={managed_by}; "
            "the portal only stops what it created."
        )
    for owner in metadata.get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("apiVersion", "").startswith("batch/"):
            return Stopped(kind="Job", name=owner["name"], uid=owner.get("uid", ""))
    return Stopped(kind="Pod", name=metadata["name"], uid=metadata.get("uid", ""))


def check_stoppable(
    cluster: Cluster, *, namespace: str, pod: str, kube: WorkloadClient | None = None
) -> Stopped:
    """What ``stop_managed_pod`` would delete; ``StopRefused`` when it would refuse, and
    ``KubeError`` when the cluster cannot say."""
    kube = kube or WorkloadClient.for_cluster(cluster)
    body = kube.get_pod(namespace, pod)
    if body is None:
        raise StopRefused(f"Pod {namespace}/{pod} no longer exists.")
    target = stop_target(body, managed_by=settings.PORTAL_NAME)
    if target.kind == "Job":
        job = kube.get_job(namespace, target.name)
        labels = ((job or {}).get("metadata") or {}).get("labels") or {}
        if job is None or labels.get(MANAGED_BY_LABEL) != settings.PORTAL_NAME:
            raise StopRefused(f"Job {namespace}/{target.name} is not managed by the portal.")
    return target


def stop_managed_pod(cluster: Cluster, *, namespace: str, pod: str) -> Stopped:
    """Stop a pod the portal manages by deleting its Job (and with it the pod) or the pod
    itself, only that very object (by uid). Anything else is refused with ``StopRefused``."""
    kube = WorkloadClient.for_cluster(cluster)
    target = check_stoppable(cluster, namespace=namespace, pod=pod, kube=kube)
    if target.kind == "Job":
        deleted = kube.delete_job(
            namespace, target.name, propagation="Background", uid=target.uid or None
        )
    else:
        deleted = kube.delete_pod(namespace, target.name, uid=target.uid or None)
    if not deleted:
        raise StopRefused(f"{target.kind} {namespace}/{target.name} was already gone.")
    return target
