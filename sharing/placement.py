"""Which nodes a layout changes. Pure: over ``clusters.node_sharing``'s readings of the nodes
and the pods on them.

A layout changes whole nodes (the GPU Operator configures every GPU of a node alike). A node
is a candidate when it carries the layout's model, offers whole GPUs and nothing shared (no
MIG or device plugin config, no slices), is Ready and schedulable, and no unfinished pod on it
asks for any GPU: only GPUs whose work has drained, or none runs, are repartitioned. Among the
candidates the picker takes the set of nodes whose GPUs cover the ask with the fewest GPUs
beyond it, then the fewest nodes, then by name; the GPUs beyond the ask become slices too, and
those slices are the cluster's, not the team's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from clusters.node_sharing import NodeSharing, PodOnNode


@dataclass(frozen=True)
class Candidates:
    """The nodes of the model, sorted into those a layout may change and why the others may
    not (each a list of node names)."""

    free: list[NodeSharing] = field(default_factory=list)
    busy: dict[str, list[PodOnNode]] = field(default_factory=dict)
    shared: list[str] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)


def candidates(
    nodes: Iterable[NodeSharing], pods: Iterable[PodOnNode], *, gpu_model: str
) -> Candidates:
    by_node: dict[str, list[PodOnNode]] = {}
    for pod in pods:
        by_node.setdefault(pod.node, []).append(pod)
    result = Candidates()
    for node in sorted(nodes, key=lambda n: n.name):
        if node.gpu_model != gpu_model:
            continue
        if node.shared:
            result.shared.append(node.name)
        elif not node.usable or node.whole_gpus <= 0:
            result.unusable.append(node.name)
        elif by_node.get(node.name):
            result.busy[node.name] = by_node[node.name]
        else:
            result.free.append(node)
    return result


@dataclass(frozen=True)
class Pick:
    """The nodes picked (name -> whole GPUs) and how many GPUs they hold beyond the ask."""

    nodes: dict[str, int]
    asked: int

    @property
    def total(self) -> int:
        return sum(self.nodes.values())

    @property
    def extra(self) -> int:
        return self.total - self.asked


def pick_nodes(free: Iterable[NodeSharing], gpus: int) -> Pick | None:
    """The free nodes whose GPUs cover ``gpus`` with the fewest GPUs beyond them (then the
    fewest nodes, then the first names); None when all of them together do not."""
    nodes = sorted(free, key=lambda n: n.name)
    if gpus <= 0 or sum(n.whole_gpus for n in nodes) < gpus:
        return None
    # A set covering the ask with a node's worth of GPUs to spare could drop that node, so the
    # best total is below gpus + the largest node: the table stops there.
    limit = gpus + max(n.whole_gpus for n in nodes)
    # best[total]: the fewest nodes reaching exactly that total (a tuple of indexes, by name).
    best: dict[int, tuple[int, ...]] = {0: ()}
    for index, node in enumerate(nodes):
        for total, chosen in sorted(best.items(), reverse=True):
            reached = total + node.whole_gpus
            if reached >= limit:
                continue
            candidate = (*chosen, index)
            known = best.get(reached)
            if known is None or (len(candidate), candidate) < (len(known), known):
                best[reached] = candidate
    total = min(t for t in best if t >= gpus)
    return Pick(nodes={nodes[i].name: nodes[i].whole_gpus for i in best[total]}, asked=gpus)


def why_none(found: Candidates, *, gpus: int, gpu_model: str) -> str:
    """Why no nodes could be picked, in words, naming the nodes and what holds them."""
    free_gpus = sum(n.whole_gpus for n in found.free)
    parts = [
        f"No set of free {gpu_model} nodes holds {gpus} whole GPUs: the free ones "
        f"({', '.join(n.name for n in found.free) or 'none'}) hold {free_gpus}."
    ]
    if found.busy:
        held = "; ".join(
            f"{node} runs {', '.join(f'{p.namespace}/{p.name}' for p in pods)}"
            for node, pods in sorted(found.busy.items())
        )
        parts.append(f"Nodes with GPU pods on them wait until their work ends: {held}.")
    if found.shared:
        parts.append(f"Already shared or partitioned: {', '.join(found.shared)}.")
    if found.unusable:
        parts.append(f"Not Ready, cordoned or without GPUs: {', '.join(found.unusable)}.")
    return " ".join(parts)
