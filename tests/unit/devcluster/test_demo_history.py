"""The demo's week of GPU history: which GPUs its pods hold, and how busy each pattern is."""

import statistics

import pytest

from devcluster.backfill import openmetrics_lines
from devcluster.demo_history import DEMO_PODS, DemoHistory, HistoryPod

END = 1_700_000_000
NODES = ("gpu-node-0", "gpu-node-1", "gpu-node-2", "gpu-node-3")
WEEK = 7 * 24 * 60
IDLE_THRESHOLD = 10  # the portal's default idle threshold, in %


def week_of(pods=DEMO_PODS, **options):
    return DemoHistory.of(pods, nodes=NODES, samples=WEEK, end=END, **options)


def test_the_pods_hold_the_last_gpus_of_the_last_nodes_one_each():
    gpus = week_of().gpu_list()

    held = [(g.node, g.gpu) for g in gpus]
    assert len(held) == len(set(held)) == sum(p.gpus for p in DEMO_PODS)
    assert held[:9] == [("gpu-node-3", i) for i in range(7, -1, -1)] + [("gpu-node-2", 7)]
    assert [g.pod for g in gpus if g.namespace == "vision"] == ["train-detector"] * 4 + [
        "notebook-lena"
    ]


def test_a_gap_is_filled_sample_for_sample():
    last = END // 60 * 60 - 37 * 60
    gap = DemoHistory.of(DEMO_PODS, nodes=NODES, samples=37, end=END)

    assert gap.timestamps()[0] == last + 60
    assert gap.timestamps()[-1] == END // 60 * 60
    assert len(gap.timestamps()) == 37


def _pod_averages(history, pod_name):
    """The pod's average utilisation over its GPUs at every sample of the week."""
    gpus = [g for g in history.gpu_list() if g.pod == pod_name]
    return [statistics.mean(history.utilisation(g, t) for g in gpus) for t in history.timestamps()]


@pytest.mark.parametrize(
    ("pod", "low", "high"),
    [
        ("train-detector", 82, 96),  # busy
        ("notebook-lena", 0, 2),  # idle: under the threshold all week
        ("finetune-asr", 20, 89),  # daily: busy by day, never idle at night
        ("eval-asr", IDLE_THRESHOLD + 1, 50),  # mixed: one busy GPU lifts the pod's average
    ],
)
def test_each_pattern_stays_in_its_band_all_week(pod, low, high):
    averages = _pod_averages(week_of(), pod)

    assert low <= min(averages)
    assert max(averages) <= high


def test_the_daily_pod_is_busier_by_day_than_at_night():
    history = week_of()
    gpu = next(g for g in history.gpu_list() if g.pod == "finetune-asr")
    noon, midnight = END // 86400 * 86400 + 12 * 3600, END // 86400 * 86400

    assert history.utilisation(gpu, noon) >= 65
    assert history.utilisation(gpu, midnight) <= 31


def test_the_mixed_pods_gpus_differ():
    history = week_of()
    first, second = [g for g in history.gpu_list() if g.pod == "eval-asr"]

    assert history.utilisation(first, END) >= 55
    assert history.utilisation(second, END) < IDLE_THRESHOLD


def test_the_history_is_written_as_dcgm_series_of_every_metric():
    history = DemoHistory.of([HistoryPod("team", "p", 2, "busy")], nodes=NODES, samples=3, end=END)
    lines = list(openmetrics_lines(history))

    samples = [line for line in lines if not line.startswith("#")]
    assert len(samples) == 4 * 2 * 3  # four metrics, two GPUs, three samples
    assert 'Hostname="gpu-node-3"' in samples[0]
    assert 'namespace="team",pod="p"' in samples[0]
    assert lines[-1] == "# EOF\n"


def test_pods_beyond_the_nodes_gpus_are_refused():
    with pytest.raises(ValueError, match="more than the nodes"):
        DemoHistory.of([HistoryPod("t", "p", 9, "idle")], nodes=NODES[:1], samples=1, end=END)
