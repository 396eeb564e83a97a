"""What a cluster's GPU nodes offer, per GPU resource name: pure arithmetic over the Node JSON.

Only nodes that can take new pods count: Ready and not cordoned. A node that disappears, goes
NotReady or is cordoned lowers the capacity the portal plans with; one that comes back raises it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# Extended resources that are GPUs (or slices of one), whatever other resources a node has.
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-", "amd.com/gpu", "gpu.intel.com/")


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
