"""The portal demo's week of GPU history: pods of the demo teams that kept their GPUs busy, left
them idle, or used them unevenly, backfilled into the devcluster's Prometheus.

`python -m devcluster.demo_history` (run by `make demo`) or `load()`. The pods sit on the
cluster's own GPU nodes (the last GPUs of the last nodes), so the portal's heatmap shows the
history on the nodes it lists; they are not real pods, so their series end where the history
ends. Idempotent: it asks Prometheus for the history's last sample and fills only the time since
(a whole week when there is none), so running the demo again never writes a sample twice.

Utilisation is deterministic (`DemoHistory.utilisation`), every other DCGM reading follows from
it as for the live simulator:

* busy: 82-96 %;
* idle: 0-2 %, under the portal's default idle threshold (10 %), so the idle check flags it;
* daily: 65-89 % from 08:00 to 20:00 UTC, 20-31 % at night (never idle);
* mixed: the pod's first GPU at 55-84 %, the others at 4-7 % (the pod on average is not idle).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kubernetes import client

from devcluster import api
from devcluster.backfill import BackfilledGpu, BackfillResult, BackfillSpec, backfill
from devcluster.gpu_models import DEFAULT_GPU_MODEL
from devcluster.log import progress

BUSY, IDLE, DAILY, MIXED = "busy", "idle", "daily", "mixed"
PATTERNS = (BUSY, IDLE, DAILY, MIXED)
DAYS = 7
STEP_SECONDS = 60
# History whose last sample is at most this old is left as it is: a restart a minute later need
# not restart Prometheus, and the idle pod still holds its GPU for Prometheus' 5-minute lookback.
FRESH_ENOUGH_SECONDS = 120
METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
)
GPU_NODE_SELECTOR = "hardware-type=gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class HistoryPod:
    """A pod of the history: where, how many GPUs, and how it used them."""

    namespace: str
    pod: str
    gpus: int
    pattern: str

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS or self.gpus < 1:
            raise ValueError(f"{self.pod}: pattern one of {PATTERNS} and at least one GPU")


# The demo's teams (tenants' seed_demo): vision and speech.
DEMO_PODS = (
    HistoryPod("vision", "train-detector", 4, BUSY),
    HistoryPod("vision", "notebook-lena", 1, IDLE),
    HistoryPod("speech", "finetune-asr", 2, DAILY),
    HistoryPod("speech", "eval-asr", 2, MIXED),
)


@dataclass(frozen=True)
class DemoHistory(BackfillSpec):
    """A backfill of the given pods on the given nodes' last GPUs, ``samples`` samples per GPU
    ending at ``end`` (a whole number of steps, so a gap is filled exactly)."""

    pods: tuple[HistoryPod, ...] = DEMO_PODS
    nodes: tuple[str, ...] = ("gpu-node-0",)
    samples: int = DAYS * 86400 // STEP_SECONDS
    metrics: tuple[str, ...] = METRICS
    # (namespace, pod) -> (the pod, the backfill index of its first GPU), for utilisation()
    _pods_by_name: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        capacity = len(self.nodes) * self.gpus_per_node
        if sum(p.gpus for p in self.pods) > capacity:
            raise ValueError(f"the history's pods need more than the nodes' {capacity} GPUs")
        if self.samples < 1:
            raise ValueError("a history of at least one sample")
        first = 0
        for pod in self.pods:
            self._pods_by_name[(pod.namespace, pod.pod)] = (pod, first)
            first += pod.gpus

    @classmethod
    def of(
        cls, pods: Sequence[HistoryPod], *, nodes: Sequence[str], samples: int, **options
    ) -> DemoHistory:
        """The history of ``pods`` on ``nodes``: ``samples`` minutes up to ``end``."""
        return cls(
            pods=tuple(pods),
            nodes=tuple(nodes),
            samples=samples,
            days=samples * STEP_SECONDS / 86400,
            gpus=sum(p.gpus for p in pods),
            namespaces=tuple(dict.fromkeys(p.namespace for p in pods)),
            step_seconds=STEP_SECONDS,
            **options,
        )

    @property
    def samples_per_series(self) -> int:
        return self.samples

    def gpu_list(self) -> list[BackfilledGpu]:
        """The pods' GPUs, taken from the last GPU of the last node backwards (the live
        simulator hands out the lowest indices first)."""
        slots = [
            (node, index)
            for node in reversed(self.nodes)
            for index in reversed(range(self.gpus_per_node))
        ]
        gpus, pod_numbers = [], {}
        for pod in self.pods:
            pod_index = pod_numbers.setdefault(pod.namespace, 0)
            pod_numbers[pod.namespace] += 1
            for _ in range(pod.gpus):
                node, index = slots[len(gpus)]
                gpus.append(
                    BackfilledGpu(
                        index=len(gpus),
                        node=node,
                        gpu=index,
                        namespace=pod.namespace,
                        pod=pod.pod,
                        pod_index=pod_index,
                    )
                )
        return gpus

    def utilisation(self, gpu: BackfilledGpu, timestamp: int) -> int:
        """Utilisation in % of one of the pods' GPUs at a sample time (see the module)."""
        pod, first_gpu = self._pods_by_name[(gpu.namespace, gpu.pod)]
        wobble = gpu.index * 5 + timestamp // 600 * 7  # changes every ten minutes
        if pod.pattern == BUSY:
            return 82 + wobble % 15
        if pod.pattern == IDLE:
            return wobble % 3
        if pod.pattern == DAILY:
            hour = timestamp // 3600 % 24
            return 65 + wobble % 25 if 8 <= hour < 20 else 20 + wobble % 12
        return 55 + wobble % 30 if gpu.index == first_gpu else 4 + wobble % 4


def history_selector(pods: Sequence[HistoryPod]) -> str:
    namespaces = "|".join(sorted({p.namespace for p in pods}))
    names = "|".join(sorted({p.pod for p in pods}))
    return f'DCGM_FI_DEV_GPU_UTIL{{job="dcgm-exporter",namespace=~"{namespaces}",pod=~"{names}"}}'


def _has_samples(cluster: api.DevCluster, selector: str, *, since: int, until: int) -> bool:
    """Whether any of the series has a sample in [since, until] (Prometheus ranges include
    both ends)."""
    query = f"count(count_over_time({selector}[{max(until - since, 1)}s]))"
    return bool(cluster.prometheus_query(query, at=until))


def last_sample(cluster: api.DevCluster, pods: Sequence[HistoryPod], *, now: int) -> int | None:
    """Unix time of the history's newest sample in the week up to ``now`` (a whole step), or
    None when there is none.

    A binary search over the steps with cheap range counts: PromQL has no function for a
    sample's own time over a range but through a subquery, and that took over ten seconds for
    a week here."""
    selector = history_selector(pods)
    steps = DAYS * 86400 // STEP_SECONDS
    if not _has_samples(cluster, selector, since=now - steps * STEP_SECONDS, until=now):
        return None
    # Samples sit on the step grid: the newest is k steps before now, for some low <= k <= high.
    low, high = 0, steps
    while low < high:
        middle = (low + high) // 2
        if _has_samples(cluster, selector, since=now - middle * STEP_SECONDS, until=now):
            high = middle
        else:
            low = middle + 1
    return now - low * STEP_SECONDS


def gpu_nodes(cluster: api.DevCluster) -> dict:
    """Where the history goes: the cluster's GPU nodes of the first one's model, by name, with
    that node's GPU count and model (``DemoHistory`` options). The devcluster has A100 and H100
    nodes; the history, written with one model's figures, stays on nodes of that model."""
    with cluster.api_client() as api_client:
        nodes = client.CoreV1Api(api_client).list_node(label_selector=GPU_NODE_SELECTOR).items
    if not nodes:
        raise RuntimeError(f"the devcluster has no GPU nodes ({GPU_NODE_SELECTOR})")
    nodes.sort(key=lambda n: n.metadata.name)
    first = nodes[0]

    def model(node) -> str:
        return (node.metadata.labels or {}).get(GPU_PRODUCT_LABEL, DEFAULT_GPU_MODEL)

    return {
        "nodes": [n.metadata.name for n in nodes if model(n) == model(first)],
        "gpus_per_node": int((first.status.allocatable or {}).get(GPU_RESOURCE, 0)),
        "gpu_model": model(first),
    }


def missing_history(
    cluster: api.DevCluster, pods: Sequence[HistoryPod] = DEMO_PODS, *, now: int | None = None
) -> DemoHistory | None:
    """The part of the week up to now that Prometheus lacks, or None when it has it all."""
    end = (now or int(time.time())) // STEP_SECONDS * STEP_SECONDS
    last = last_sample(cluster, pods, now=end)
    if last is not None and end - last <= FRESH_ENOUGH_SECONDS:
        return None
    week = DAYS * 86400 // STEP_SECONDS
    samples = week if last is None else (end - last) // STEP_SECONDS
    return DemoHistory.of(pods, end=end, samples=samples, **gpu_nodes(cluster))


def load(
    pods: Sequence[HistoryPod] = DEMO_PODS,
    *,
    restart_prometheus: bool = True,
    wait_seconds: float = 150,
) -> BackfillResult | None:
    """Backfill what is missing of the week; None when nothing was. Without a restart,
    Prometheus finds new blocks at its next reload (within a minute): wait for that."""
    cluster = api.running()
    if cluster is None:
        raise RuntimeError(
            "the devcluster is not running: start it first (python -m devcluster up)"
        )
    spec = missing_history(cluster, pods)
    if spec is None:
        progress("the demo's GPU history is up to date")
        return None
    progress(
        f"backfilling {spec.samples} minutes of GPU history for {len(spec.pods)} pods in "
        f"{', '.join(spec.namespaces)}"
    )
    result = backfill(spec, restart_prometheus=restart_prometheus)
    selector = history_selector(pods)
    deadline = time.monotonic() + wait_seconds
    end = spec.end_timestamp
    while not _has_samples(cluster, selector, since=end, until=end):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Prometheus did not load the history within {wait_seconds}s")
        time.sleep(2)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster.demo_history",
        description="Backfill the portal demo's week of GPU history (only what is missing).",
    )
    parser.add_argument(
        "--no-restart",
        action="store_true",
        help="do not restart Prometheus; wait until it loads the history by itself (<= 1 min)",
    )
    args = parser.parse_args(argv)
    load(restart_prometheus=not args.no_restart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
