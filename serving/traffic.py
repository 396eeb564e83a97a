"""How a service's traffic is split between its live revisions, and how many replicas each
runs: pure arithmetic over the stored state, shared by the manifests, the quota check and the
pages.

With the Gateway API (``Routing.GATEWAY_API``) the weights are an HTTPRoute's backend weights,
exact, and every revision runs the replicas it was given. Without it one Service selects the
pods of every live revision and a request goes to any ready replica, so a revision's share is
its share of the replicas: the portal approximates the weights by replica counts. The revision
with the largest weight keeps its replicas, each other runs as many as its weight asks beside
it (at least one), and the share that results is what pages show beside the weight asked for.

A revision rolling out (weight 0 until it takes over) runs its own replicas either way: behind
an HTTPRoute it takes no traffic until it is promoted; behind one Service its replicas take
their share as they become ready, as in a Deployment's rolling update.

No traffic is served on the devcluster (kwok runs no containers): there the objects and their
states are what is real.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

GATEWAY_API = "gateway-api"
REPLICAS = "replicas"
STABLE = "stable"


class RevisionLike(Protocol):
    number: int
    role: str
    replicas: int
    weight: int
    gpus: int


@dataclass(frozen=True)
class Share:
    """One live revision in the plan: the weight asked for (%), the replicas the portal runs,
    and the share of the traffic that gives (%)."""

    number: int
    weight: int
    replicas: int
    share: float


def plan(revisions: Sequence[RevisionLike], *, routing: str, stopped: bool = False) -> list[Share]:
    """The live revisions' replicas and traffic shares, in the order given."""
    if stopped:
        return [Share(r.number, r.weight, 0, 0.0) for r in revisions]
    if routing == GATEWAY_API:
        return [Share(r.number, r.weight, r.replicas, float(r.weight)) for r in revisions]
    weighted = [r for r in revisions if r.weight > 0]
    anchor = max(weighted, key=lambda r: (r.weight, r.role == STABLE), default=None)
    replicas = {}
    for revision in revisions:
        if anchor is None or revision.weight == 0 or revision is anchor:
            replicas[revision.number] = revision.replicas
        else:
            asked = anchor.replicas * revision.weight / anchor.weight
            replicas[revision.number] = max(1, round(asked))
    total = sum(replicas.values())
    return [
        Share(
            r.number,
            r.weight,
            replicas[r.number],
            round(100 * replicas[r.number] / total, 1) if total else 0.0,
        )
        for r in revisions
    ]


def replicas_by_revision(
    revisions: Sequence[RevisionLike], *, routing: str, stopped: bool = False
) -> dict[int, int]:
    return {s.number: s.replicas for s in plan(revisions, routing=routing, stopped=stopped)}


def gpus_held(revisions: Sequence[RevisionLike], *, routing: str, stopped: bool = False) -> int:
    """GPUs the plan's replicas ask for: what counts against the team's quota."""
    gpus = {r.number: r.gpus for r in revisions}
    return sum(
        s.replicas * gpus[s.number] for s in plan(revisions, routing=routing, stopped=stopped)
    )
