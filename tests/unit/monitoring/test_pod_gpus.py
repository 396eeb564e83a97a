"""What a pod holds, by kind: weighed by the one fraction table and described as what it is."""

import datetime
from fractions import Fraction

import pytest

from clusters.models import Cluster
from monitoring import pod_gpus, promql
from monitoring.metrics import PodUsage, pod_usage
from monitoring.prometheus import Sample

A100 = "NVIDIA A100-SXM4-80GB"  # as DCGM's modelName says it
A30 = "NVIDIA A30"


def labels(pod, *, node="gpu-0", model=A100, profile="", namespace="vision"):
    return {
        "namespace": namespace,
        "pod": pod,
        promql.NODE_LABEL: node,
        promql.MODEL_LABEL: model,
        promql.MIG_PROFILE_LABEL: profile,
    }


def by_pod(samples, shared_nodes=None):
    return pod_gpus.holdings_by_pod(
        samples,
        pod_key=("namespace", "pod"),
        node_label=promql.NODE_LABEL,
        model_label=promql.MODEL_LABEL,
        profile_label=promql.MIG_PROFILE_LABEL,
        shared_nodes=shared_nodes or {},
    )


def test_a_mig_slice_is_described_as_a_slice_and_weighs_its_share_of_a_gpu():
    held = by_pod([(labels("nb", profile="1g.10gb"), 1)])[("vision", "nb")]

    assert pod_gpus.describe(held) == "1 × 1g.10gb slice (1/7 GPU)"
    assert pod_gpus.gpu_equivalents(held) == pytest.approx(1 / 7)


def test_slices_of_an_a30_are_quarters_and_several_read_as_their_sum():
    held = by_pod([(labels("nb", model=A30, profile="1g.6gb"), 2)])[("vision", "nb")]

    assert pod_gpus.describe(held) == "2 × 1g.6gb slices (1/2 GPU)"
    assert pod_gpus.gpu_equivalents(held) == 0.5


def test_whole_gpus_are_counted_as_gpus():
    held = by_pod([(labels("trainer"), 2)])[("vision", "trainer")]

    assert pod_gpus.describe(held) == "2 GPUs"
    assert pod_gpus.gpu_equivalents(held) == 2


def test_a_series_on_a_shared_node_is_a_replica_of_its_gpu():
    held = by_pod([(labels("nb", node="shared-0"), 1)], {"shared-0": 4})[("vision", "nb")]

    assert pod_gpus.describe(held) == "1 shared GPU replica (1/4 GPU)"
    assert pod_gpus.gpu_equivalents(held) == 0.25


def test_a_pods_groups_on_several_nodes_merge_and_kinds_are_listed_whole_gpus_first():
    pods = by_pod(
        [
            (labels("mixed", node="mig-0", profile="3g.40gb"), 1),
            (labels("mixed", node="mig-1", profile="3g.40gb"), 1),
            (labels("mixed", node="gpu-0"), 1),
            (labels("other", node="gpu-0"), 1),
        ]
    )

    mixed = pods[("vision", "mixed")]
    assert pod_gpus.describe(mixed) == "1 GPU + 2 × 3g.40gb slices (6/7 GPU)"
    assert pod_gpus.gpu_equivalents(mixed) == pytest.approx(1 + 6 / 7)
    assert sum(h.count for h in mixed) == 3
    assert pod_gpus.describe(pods[("vision", "other")]) == "1 GPU"


def test_gpu_equivalents_read_as_a_fraction_below_one_and_decimals_above():
    assert pod_gpus.gpus_text(Fraction(4, 7)) == "4/7 GPU"
    assert pod_gpus.gpus_text(1) == "1 GPU"
    assert pod_gpus.gpus_text(Fraction(10, 7)) == "1.43 GPUs"


def test_a_pod_usage_without_kinds_reads_as_whole_gpus():
    usage = PodUsage("vision", "old", 2, None, False)

    assert usage.gpus_described == "2 GPUs"
    assert usage.gpu_equivalents == 2


class FakePrometheus:
    """Answers the two instant queries ``pod_usage`` asks: the kinds and the averages."""

    def __init__(self, kinds, averages=()):
        self.kinds, self.averages, self.asked = kinds, averages, []

    def query(self, query, *, at=None):
        self.asked.append(query)
        if query.startswith("count by"):
            return [Sample(labels, value) for labels, value in self.kinds]
        return [Sample(labels, value) for labels, value in self.averages]


def test_pod_usage_counts_units_describes_slices_and_keeps_arithmetic_in_gpu_equivalents():
    cluster = Cluster(name="east", shared_gpu_replicas={"shared-0": 2})
    prometheus = FakePrometheus(
        kinds=[
            (labels("sliced", node="mig-0", profile="1g.10gb"), 4),
            (labels("sharing", node="shared-0"), 1),
        ],
        averages=[({"namespace": "vision", "pod": "sliced"}, 3.0)],
    )

    usage = {u.pod: u for u in pod_usage(prometheus, cluster, namespace="vision")}

    assert "GPU_I_PROFILE" in prometheus.asked[0]
    assert "Hostname" in prometheus.asked[0]
    sliced, sharing = usage["sliced"], usage["sharing"]
    assert (sliced.gpus, sliced.gpu_equivalents) == (4, pytest.approx(4 / 7))
    assert sliced.gpus_described == "4 × 1g.10gb slices (4/7 GPU)"
    assert sliced.idle  # 3% under the default 10% threshold
    assert (sharing.gpus, sharing.gpu_equivalents) == (1, 0.5)
    assert sharing.gpus_described == "1 shared GPU replica (1/2 GPU)"
    assert sharing.average_utilisation is None
    assert not sharing.idle


def test_an_idle_episode_recorded_before_kinds_were_told_apart_says_its_count():
    from monitoring.models import IdlePod

    old = IdlePod(gpus=1, average_utilisation=1.0, first_idle_at=datetime.datetime.now())
    new = IdlePod(gpus=1, gpus_described="1 × 1g.10gb slice (1/7 GPU)", average_utilisation=1.0)

    assert old.gpus_text == "1 GPU"
    assert new.gpus_text == "1 × 1g.10gb slice (1/7 GPU)"
