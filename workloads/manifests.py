"""The pieces of any workload's pods (a job's, a service's replicas): the containers with their
resources and environment, the security context every pod gets, and where GPU pods may go (the
cluster's GPU node labels, model label and taint) with Kueue's labels on queued work. Pure
builders on the ``workloads.specs`` requests; ``cluster_placement`` reads a cluster's row and the
settings.

* GPUs are limits only, on the container that uses them (the API server defaults the request to
  the limit for extended resources, which is what the team's ResourceQuota counts); CPU and
  memory are asked for as much as they are limited to.
* A container that asks for no GPU gets ``NVIDIA_VISIBLE_DEVICES=void`` (``hide_gpus``).
* GPU pods get one required node affinity term from the cluster's GPU node selector
  (``hardware-type In [gpu]`` by default) plus the GPU model label when a model was chosen, and
  a toleration for the GPU taint, so they land on GPU nodes and nowhere else.
* Every pod and container gets the safe part of the restricted Pod Security Standard (the
  runtime's default seccomp profile, no privilege escalation, every capability dropped), and
  ``runAsNonRoot`` where the cluster enforces restricted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings

from clusters.vocabulary import (
    DEFAULT_GPU_MODEL_LABEL,
    DEFAULT_GPU_NODE_SELECTOR,
    DEFAULT_GPU_TAINT_KEY,
    DEFAULT_PORTAL_NAME,
    KUEUE_PRIORITY_CLASS_LABEL,
    KUEUE_QUEUE_LABEL,
    NO_GPUS,
    NVIDIA_VISIBLE_DEVICES,
    POD_SECURITY_BASELINE,
    POD_SECURITY_RESTRICTED,
    priority_class_name,
)
from workloads.specs import ContainerRequest, EnvPairs

if TYPE_CHECKING:
    from clusters.models import Cluster


@dataclass(frozen=True)
class Placement:
    """Where a cluster's GPU pods may go: its GPU node labels and taint, and the portal's name."""

    node_selector: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_GPU_NODE_SELECTOR))
    gpu_taint_key: str = DEFAULT_GPU_TAINT_KEY
    gpu_model_label: str = DEFAULT_GPU_MODEL_LABEL
    portal_name: str = DEFAULT_PORTAL_NAME
    # The Pod Security Standard the cluster's team namespaces enforce.
    pod_security_level: str = POD_SECURITY_BASELINE


def kueue_labels(*, queue: str, priority: str, portal_name: str) -> dict[str, str]:
    """Kueue's labels on queued work (a Job, a Deployment and its pods): the team's LocalQueue
    it waits in and the WorkloadPriorityClass it runs at; none without a queue."""
    if not queue:
        return {}
    return {
        KUEUE_QUEUE_LABEL: queue,
        KUEUE_PRIORITY_CLASS_LABEL: priority_class_name(portal_name, priority),
    }


def cpu_quantity(cores: Decimal) -> str:
    """Cores as a Kubernetes quantity in millicores: Decimal("1.5") -> "1500m"."""
    return f"{int(Decimal(cores) * 1000)}m"


def memory_quantity(gib: Decimal) -> str:
    """GiB as a Kubernetes quantity in MiB: Decimal("0.5") -> "512Mi"."""
    return f"{int(Decimal(gib) * 1024)}Mi"


def _cpu_memory(cpu_cores: Decimal | None, memory_gib: Decimal | None) -> dict[str, str]:
    amounts = {}
    if cpu_cores is not None:
        amounts["cpu"] = cpu_quantity(cpu_cores)
    if memory_gib is not None:
        amounts["memory"] = memory_quantity(memory_gib)
    return amounts


def _resources(limits: dict[str, str], requests: dict[str, str]) -> dict:
    resources = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    return resources


def container_security_context() -> dict:
    """What restricted asks of every container, and the portal's containers never need."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def pod_security_context(placement: Placement) -> dict:
    """The runtime's default seccomp profile always; a non-root user where the cluster
    enforces restricted (the kubelet then refuses an image that would run as root)."""
    context: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    if placement.pod_security_level == POD_SECURITY_RESTRICTED:
        context["runAsNonRoot"] = True
    return context


def _env(pairs: EnvPairs) -> list[dict]:
    return [{"name": name, "value": value} for name, value in pairs]


def hide_gpus(env: EnvPairs) -> EnvPairs:
    """The environment of a container that asks for no GPUs. Images built on CUDA set
    NVIDIA_VISIBLE_DEVICES=all, and on a GPU node the NVIDIA runtime would then hand every GPU
    of the node to that container: "void" stops it."""
    kept = tuple((name, value) for name, value in env if name != NVIDIA_VISIBLE_DEVICES)
    return (*kept, (NVIDIA_VISIBLE_DEVICES, NO_GPUS))


def container(
    name: str,
    request: ContainerRequest,
    *,
    gpus: dict[str, str] | None = None,
    env: EnvPairs | None = None,
) -> dict:
    """A workload's container: its image, command and arguments as the user's lists, its
    environment (``env`` in place of the request's own when given), and its resources. CPU and
    memory are asked for as much as they are limited to: a GPU workload that is throttled or
    evicted wastes the GPUs it holds. GPUs are limits only (the API server defaults the request
    to the limit for extended resources, which is what the team's ResourceQuota counts)."""
    cpu_memory = _cpu_memory(request.cpu_cores, request.memory_gib)
    manifest: dict = {"name": name, "image": request.image}
    if request.command:
        manifest["command"] = list(request.command)
    if request.args:
        manifest["args"] = list(request.args)
    pairs = request.env if env is None else env
    if pairs:
        manifest["env"] = _env(pairs)
    resources = _resources({**(gpus or {}), **cpu_memory}, cpu_memory)
    if resources:
        manifest["resources"] = resources
    manifest["securityContext"] = container_security_context()
    return manifest


def gpu_node_affinity(gpu_model: str, placement: Placement) -> dict:
    """One required term for any workload's GPU pods: every GPU node label (``In [value]``),
    and the model when one was chosen."""
    expressions = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in sorted(placement.node_selector.items())
    ]
    if gpu_model:
        expressions.append(
            {"key": placement.gpu_model_label, "operator": "In", "values": [gpu_model]}
        )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]
            }
        }
    }


def gpu_toleration(placement: Placement) -> dict:
    """Tolerate the GPU taint whatever its value (device plugins and clouds differ)."""
    return {"key": placement.gpu_taint_key, "operator": "Exists", "effect": "NoSchedule"}


def cluster_placement(cluster: Cluster) -> Placement:
    """A cluster's GPU placement rules, as its row holds them."""
    return Placement(
        node_selector={str(k): str(v) for k, v in (cluster.gpu_node_selector or {}).items()},
        gpu_taint_key=cluster.gpu_taint_key,
        gpu_model_label=cluster.gpu_model_label,
        portal_name=settings.PORTAL_NAME,
        pod_security_level=cluster.pod_security_level,
    )
