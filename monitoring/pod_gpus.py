"""What GPUs a pod holds, by kind, and how a person reads it: pure, no I/O.

Prometheus counts a pod's DCGM series (``promql.pod_gpu_kinds``: one per whole GPU, MIG instance
or share of a shared GPU, by node, model and MIG profile); here each group becomes a
``Holding`` weighed by ``gpu_shares.gpu_share``, the one table of what a unit is worth, so that
a pod holding one ``1g.10gb`` slice reads "1 x 1g.10gb slice (1/7 GPU)" in an idle notice or a
pods table and adds 1/7 to the GPUs a team holds, never "1 GPU".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from clusters.vocabulary import DEFAULT_GPU_RESOURCE, MIG_RESOURCE_PREFIX, SHARED_GPU_RESOURCE
from monitoring.gpu_shares import gpu_share

WHOLE, MIG, SHARED = "gpu", "mig", "shared"


@dataclass(frozen=True)
class Holding:
    """``count`` units of one GPU kind a pod holds, each ``share`` of a whole GPU: whole GPUs,
    slices of one MIG profile, or replicas of a GPU shared ``replicas`` ways."""

    kind: str
    count: int
    share: Fraction = Fraction(1)
    profile: str = ""  # a MIG slice's profile ("1g.10gb")
    replicas: int = 1  # a shared GPU's replicas per GPU

    @property
    def gpu_equivalents(self) -> Fraction:
        return self.count * self.share

    def describe(self) -> str:
        """ "2 GPUs", "1 x 1g.10gb slice (1/7 GPU)", "1 shared GPU replica (1/4 GPU)"."""
        many = self.count != 1
        if self.kind == MIG:
            what = f"{self.count} × {self.profile} slice{'s' if many else ''}"
        elif self.kind == SHARED:
            what = f"{self.count} shared GPU replica{'s' if many else ''}"
        else:
            return f"{self.count} GPU{'s' if many else ''}"
        return f"{what} ({gpus_text(self.gpu_equivalents)})"


def gpus_text(equivalents: Fraction | float) -> str:
    """GPU equivalents as a person reads them: "1 GPU", "2 GPUs", "3/7 GPU", "1.43 GPUs"."""
    value = Fraction(equivalents).limit_denominator(64)
    if value.denominator == 1:
        return f"{value.numerator} GPU{'' if value.numerator == 1 else 's'}"
    if value < 1:
        return f"{value.numerator}/{value.denominator} GPU"
    return f"{float(value):.2f} GPUs"


def holding(*, count: int, gpu_model: str, mig_profile: str, replicas: int) -> Holding:
    """The holding of ``count`` series of one group: a MIG slice's when it names a profile, a
    shared GPU's replicas on a node whose GPUs are split (``replicas`` > 1), else whole GPUs."""
    if mig_profile:
        share = gpu_share(f"{MIG_RESOURCE_PREFIX}{mig_profile}", gpu_model)
        return Holding(MIG, count, share, profile=mig_profile)
    if replicas > 1:
        share = gpu_share(SHARED_GPU_RESOURCE, gpu_model, replicas)
        return Holding(SHARED, count, share, replicas=replicas)
    return Holding(WHOLE, count, gpu_share(DEFAULT_GPU_RESOURCE, gpu_model))


def merged(holdings: Iterable[Holding]) -> tuple[Holding, ...]:
    """The holdings with those of one kind, profile and share added up (a pod's slices on two
    nodes are one line), whole GPUs first, then slices, then shared replicas."""
    totals: dict[tuple, int] = {}
    for h in holdings:
        key = (h.kind, h.profile, h.share, h.replicas)
        totals[key] = totals.get(key, 0) + h.count
    order = {WHOLE: 0, MIG: 1, SHARED: 2}
    return tuple(
        Holding(kind, count, share, profile=profile, replicas=replicas)
        for (kind, profile, share, replicas), count in sorted(
            totals.items(), key=lambda item: (order[item[0][0]], -item[0][2], item[0][1])
        )
    )


def describe(holdings: Iterable[Holding]) -> str:
    """A pod's GPUs in words: "2 GPUs", "1 x 1g.10gb slice (1/7 GPU)", or several joined."""
    return " + ".join(h.describe() for h in merged(holdings)) or "no GPU"


def gpu_equivalents(holdings: Iterable[Holding]) -> float:
    return float(sum((h.gpu_equivalents for h in holdings), Fraction(0)))


def holdings_by_pod(
    samples: Iterable[tuple[Mapping[str, str], float]],
    *,
    pod_key: tuple[str, str],
    node_label: str,
    model_label: str,
    profile_label: str,
    shared_nodes: Mapping[str, int],
) -> dict[tuple[str, str], tuple[Holding, ...]]:
    """(namespace, pod) -> its holdings, from ``promql.pod_gpu_kinds``' (labels, count)
    samples; ``shared_nodes`` is node -> replicas for the nodes whose GPUs are shared."""
    by_pod: dict[tuple[str, str], list[Holding]] = {}
    for labels, value in samples:
        key = (labels.get(pod_key[0], ""), labels.get(pod_key[1], ""))
        by_pod.setdefault(key, []).append(
            holding(
                count=int(value),
                gpu_model=labels.get(model_label, ""),
                mig_profile=labels.get(profile_label, ""),
                replicas=shared_nodes.get(labels.get(node_label, ""), 1),
            )
        )
    return {key: merged(found) for key, found in by_pod.items()}
