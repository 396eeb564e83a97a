"""What the review page shows of a pending layout on its cluster now: the nodes of its model,
what runs on each (pods and their teams), and the nodes it would take if approved now. Reads
each cluster once per page; a cluster that cannot be read is said so, never a 500."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from clusters.kube import KubeError
from clusters.node_sharing import (
    NodeSharing,
    NodeSharingClient,
    PodOnNode,
    gpu_pods_on,
    node_sharing,
)
from sharing.models import LayoutRequest
from sharing.placement import Pick, candidates, pick_nodes, why_none
from tenants.models import Team


@dataclass(frozen=True)
class PodRow:
    pod: PodOnNode
    team: str  # the team's name, or "" for a namespace that is no team's


@dataclass(frozen=True)
class NodeRow:
    node: NodeSharing
    pods: list[PodRow]
    status: str  # "free", "busy", "shared", "unusable"
    picked: bool = False


@dataclass
class Preview:
    error: str = ""
    pick: Pick | None = None
    why: str = ""
    nodes: list[NodeRow] = field(default_factory=list)


@dataclass
class _ClusterRead:
    readings: list[NodeSharing]
    pods: list[PodOnNode]


def _read(cluster) -> _ClusterRead | str:
    try:
        kube = NodeSharingClient.for_cluster(cluster)
        readings = [
            node_sharing(node, model_label=cluster.gpu_model_label) for node in kube.gpu_nodes()
        ]
        return _ClusterRead(readings, gpu_pods_on(kube.unfinished_pods()))
    except KubeError as error:
        return f"Cannot read cluster {cluster.name} now: {error}"


def previews(layouts: Iterable[LayoutRequest]) -> dict[int, Preview]:
    layouts = list(layouts)
    reads: dict[int, _ClusterRead | str] = {}
    for layout in layouts:
        if layout.cluster_id not in reads:
            reads[layout.cluster_id] = _read(layout.cluster)
    namespaces = {
        pod.namespace for read in reads.values() if not isinstance(read, str) for pod in read.pods
    }
    teams = dict(Team.objects.filter(slug__in=namespaces).values_list("slug", "name"))
    return {layout.pk: _preview(layout, reads[layout.cluster_id], teams) for layout in layouts}


def _preview(layout: LayoutRequest, read: _ClusterRead | str, teams: dict[str, str]) -> Preview:
    if isinstance(read, str):
        return Preview(error=read)
    found = candidates(read.readings, read.pods, gpu_model=layout.gpu_model)
    pick = pick_nodes(found.free, layout.gpus)
    by_node: dict[str, list[PodRow]] = {}
    for pod in read.pods:
        by_node.setdefault(pod.node, []).append(PodRow(pod, teams.get(pod.namespace, "")))
    status = {n.name: "free" for n in found.free}
    status |= dict.fromkeys(found.busy, "busy")
    status |= dict.fromkeys(found.shared, "shared")
    status |= dict.fromkeys(found.unusable, "unusable")
    rows = [
        NodeRow(
            node=reading,
            pods=by_node.get(reading.name, []),
            status=status[reading.name],
            picked=pick is not None and reading.name in pick.nodes,
        )
        for reading in sorted(read.readings, key=lambda r: r.name)
        if reading.name in status
    ]
    why = "" if pick else why_none(found, gpus=layout.gpus, gpu_model=layout.gpu_model)
    return Preview(pick=pick, why=why, nodes=rows)
