"""PromQL builders: both label layouts, both utilisation metrics, escaping, bounded steps."""

import datetime
import re

import pytest

from clusters.models import Cluster
from core.validators import parse_label_matchers
from monitoring import promql, rules
from monitoring.metrics import metrics_config
from monitoring.promql import MetricsConfig

UTC = datetime.UTC
PERCENT = MetricsConfig()
RATIO = MetricsConfig(utilisation_metric=promql.GR_ENGINE_ACTIVE)
EXPORTED = MetricsConfig(layout=promql.LAYOUT_EXPORTED)
PIN = parse_label_matchers('job="dcgm-exporter", instance=~"10\\\\.0\\\\..*"')
PINNED = MetricsConfig(exporter=PIN)
PINNED_EXPORTED_RATIO = MetricsConfig(
    layout=promql.LAYOUT_EXPORTED, utilisation_metric=promql.GR_ENGINE_ACTIVE, exporter=PIN
)


def test_selector_filters_on_the_namespace_label_of_the_layout():
    assert promql.selector("M", PERCENT, namespace="vision") == 'M{namespace="vision"}'
    assert promql.selector("M", EXPORTED, namespace="vision") == 'M{exported_namespace="vision"}'


def test_selector_for_held_gpus_requires_a_namespace_label():
    assert promql.selector("M", PERCENT, held=True) == 'M{namespace!=""}'
    assert promql.selector("M", EXPORTED, held=True) == 'M{exported_namespace!=""}'


def test_selector_without_filters_selects_every_gpu():
    assert promql.selector("M", PERCENT) == "M{}"


def test_selector_escapes_label_values():
    assert promql.selector("M", PERCENT, namespace='a"b\\c') == 'M{namespace="a\\"b\\\\c"}'


def test_selector_matches_several_pods_with_an_escaped_regex():
    query = promql.selector("M", PERCENT, namespace="ns", pods=["train-1", "a.b"])
    assert query == 'M{namespace="ns",pod=~"a\\\\.b|train\\\\-1"}'


def test_selector_with_one_pod_uses_equality():
    assert promql.selector("M", EXPORTED, namespace="ns", pods=["p"]) == (
        'M{exported_namespace="ns",exported_pod="p"}'
    )


def test_selector_refuses_empty_lists_rather_than_matching_everything():
    with pytest.raises(ValueError, match="matches nothing"):
        promql.selector("M", PERCENT, namespaces=[])
    with pytest.raises(ValueError, match="matches nothing"):
        promql.selector("M", PERCENT, namespace="ns", pods=[])


def test_namespaces_become_an_anchored_alternation():
    query = promql.selector("M", PERCENT, namespaces=["b", "a", "b"])
    assert query == 'M{namespace=~"a|b"}'


def test_unknown_layout_or_metric_is_refused():
    with pytest.raises(ValueError, match="layout"):
        MetricsConfig(layout="pods")
    with pytest.raises(ValueError, match="metric"):
        MetricsConfig(utilisation_metric="DCGM_FI_DEV_SM_CLOCK")


def test_percent_metric_is_aggregated_as_is_with_mig_instances_engine_activity_in_percent():
    assert promql.utilisation_by_pod(PERCENT, namespace="vision") == (
        'avg by (pod) ((DCGM_FI_DEV_GPU_UTIL{namespace="vision"} or '
        '(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="vision",GPU_I_PROFILE!=""}) * 100))'
    )


def test_ratio_metric_is_scaled_to_percent():
    assert promql.utilisation_by_pod(RATIO, namespace="vision") == (
        '(avg by (pod) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="vision"})) * 100'
    )


def test_exported_layout_groups_by_exported_pod():
    assert promql.utilisation_by_pod(EXPORTED, namespace="v").startswith(
        'avg by (exported_pod) ((DCGM_FI_DEV_GPU_UTIL{exported_namespace="v"} or '
    )


def test_gpu_series_are_keyed_by_node_gpu_index_and_mig_instance():
    query = promql.utilisation_by_gpu(PERCENT, namespace="v", pods=["p"])
    assert query.startswith(
        'max by (Hostname, gpu, GPU_I_PROFILE, GPU_I_ID) ((DCGM_FI_DEV_GPU_UTIL{namespace="v",'
    )
    # A shared GPU is one row: its pods' shares summed.
    assert promql.utilisation_heatmap(RATIO) == (
        "(sum by (Hostname, gpu, GPU_I_PROFILE, GPU_I_ID) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{})) * 100"
    )


def test_gauges_sum_memory_and_power_and_take_the_hottest_temperature():
    assert promql.gauge_by(promql.FB_USED, PERCENT, ["pod"], namespace="v").startswith("sum by")
    assert promql.gauge_by(promql.POWER, PERCENT, ["pod"], namespace="v").startswith("sum by")
    assert promql.gauge_by(promql.TEMPERATURE, PERCENT, ["pod"], namespace="v").startswith("max")


def test_gpus_held_sum_the_namespace_series_shares_and_read_zero_when_there_are_none():
    query = promql.gpus_held(EXPORTED, namespace="v")
    assert query.startswith(
        'sum(((DCGM_FI_DEV_GPU_UTIL{exported_namespace="v",GPU_I_PROFILE=""} * 0 + 1) or '
    )
    assert query.endswith(") or vector(0)")


def test_pod_average_only_judges_pods_held_for_a_whole_window_and_still_running():
    query = promql.pod_average_utilisation(RATIO, window_minutes=5, namespace="v")
    series = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="v"}'
    assert query == (
        f"((avg by (namespace, pod) ((avg_over_time({series}[5m])))) * 100) "
        f"and on (namespace, pod) {series} "
        f"and on (namespace, pod) {series} offset 5m"
    )


def test_pod_average_of_a_ratio_metric_scales_the_average_not_the_range():
    query = promql.pod_average_utilisation(RATIO, window_minutes=10)
    assert "((avg by (namespace, pod) ((avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE" in query
    assert "[10m])))) * 100)" in query


def test_idle_rule_is_the_seeds_low_gpu_usage_per_pod():
    assert promql.idle_rule_expression(
        PERCENT, threshold_percent=10, window_minutes=5, namespace="v"
    ) == (
        'avg by (namespace, pod) (((avg_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="v"}[5m])) or '
        '((avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="v",GPU_I_PROFILE!=""}[5m])) '
        "* 100))) < 10"
    )


def test_gpu_seconds_held_sample_the_gpu_count_over_the_half_open_period():
    query = promql.gpu_seconds_held(PERCENT, period_seconds=86400, resolution=60, held=True)
    assert query.startswith(
        'sum_over_time((sum by (namespace) (((DCGM_FI_DEV_GPU_UTIL{namespace!="",GPU_I_PROFILE=""}'
    )
    assert query.endswith("[86399s:60s]) * 60")


def test_gpu_seconds_used_weight_by_utilisation_in_either_unit():
    percent = promql.gpu_seconds_used(PERCENT, period_seconds=3600, resolution=60, held=True)
    ratio = promql.gpu_seconds_used(RATIO, period_seconds=3600, resolution=60, held=True)
    assert percent.endswith("[3599s:60s]) * 0.6")
    assert ratio.endswith("[3599s:60s]) * 60")


def test_gpu_seconds_idle_count_held_gpus_under_the_threshold_in_either_unit():
    percent = promql.gpu_seconds_idle(
        PERCENT, period_seconds=3600, resolution=60, threshold_percent=10, held=True
    )
    ratio = promql.gpu_seconds_idle(
        RATIO, period_seconds=3600, resolution=60, threshold_percent=10, held=True
    )
    assert 'DCGM_FI_DEV_GPU_UTIL{namespace!="",GPU_I_PROFILE=""} < 10)' in percent
    # The MIG instances' engine activity, a ratio on a percent cluster too.
    assert 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!="",GPU_I_PROFILE!="",' in percent
    assert "} < 0.1)" in percent
    assert 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!="",GPU_I_PROFILE=""} < 0.1)' in ratio
    assert percent.endswith("[3599s:60s]) * 60")


@pytest.mark.parametrize(
    "seconds",
    [60, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 400 * 86400, 12_345, 1],
)
def test_the_step_keeps_every_series_within_a_thousand_points(seconds):
    step = promql.step_for(seconds)
    assert seconds / step + 1 <= promql.MAX_POINTS


def test_steps_are_round_numbers_that_grow_with_the_window():
    steps = [promql.step_for(d.total_seconds()) for d in promql.PRESET_WINDOWS.values()]
    assert steps == [5, 30, 120, 900]


def test_heatmaps_get_a_coarser_step():
    assert promql.step_for(3600, promql.HEATMAP_COLUMNS) == 30


def test_window_aligns_its_end_to_a_whole_step_and_keeps_its_length():
    now = datetime.datetime(2026, 1, 1, 12, 0, 7, tzinfo=UTC)
    window = promql.preset_window("1h", now)
    start, end = window.aligned()
    assert end == now.timestamp() - 2
    assert end - start == 3600


def test_window_refuses_naive_or_empty_ranges():
    now = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="timezone"):
        promql.Window(start=now.replace(tzinfo=None), end=now.replace(tzinfo=None))
    with pytest.raises(ValueError, match="end after"):
        promql.Window(start=now, end=now)


# --- the exporter pin --------------------------------------------------------------------------


def test_the_exporter_pin_comes_first_in_a_selector():
    assert promql.selector("M", PINNED, namespace="vision") == (
        'M{job="dcgm-exporter",instance=~"10\\\\.0\\\\..*",namespace="vision"}'
    )
    assert promql.selector("M", PINNED) == 'M{job="dcgm-exporter",instance=~"10\\\\.0\\\\..*"}'


def _every_query(config: MetricsConfig) -> dict[str, str]:
    window = promql.Window(
        start=datetime.datetime(2026, 1, 1, tzinfo=UTC),
        end=datetime.datetime(2026, 1, 2, tzinfo=UTC),
    )
    usage = {"period_seconds": 86400, "resolution": 300}
    queries = {
        "utilisation_by_pod": promql.utilisation_by_pod(config, namespace="vision"),
        "utilisation_by_gpu": promql.utilisation_by_gpu(
            config, namespace="vision", pods=["a", "b"]
        ),
        "utilisation_heatmap": promql.utilisation_heatmap(config),
        "team_average_utilisation": promql.team_average_utilisation(config, namespace="vision"),
        "gpus_held": promql.gpus_held(config, namespace="vision"),
        "gpus_held_by_namespace": promql.gpus_held_by_namespace(config),
        "average_utilisation_by_namespace": promql.average_utilisation_by_namespace(config, window),
        "pod_average_utilisation": promql.pod_average_utilisation(config, window_minutes=5),
        "team_pod_average_utilisation": promql.pod_average_utilisation(
            config, window_minutes=5, namespace="vision"
        ),
        "pod_gpu_count": promql.pod_gpu_count(config),
        "pod_gpu_kinds": promql.pod_gpu_kinds(config, namespace="vision"),
        "idle_rule_expression": promql.idle_rule_expression(
            config, threshold_percent=10, window_minutes=5
        ),
        "gpu_seconds_held": promql.gpu_seconds_held(config, held=True, **usage),
        "gpu_seconds_used": promql.gpu_seconds_used(config, namespaces=["a", "b"], **usage),
        "gpu_seconds_idle": promql.gpu_seconds_idle(
            config, threshold_percent=10, held=True, **usage
        ),
        "alert_rule": rules.low_gpu_usage_rule(
            config, threshold_percent=10, window_minutes=5, namespace="vision"
        )["expr"],
    }
    for metric in promql.GAUGE_AGGREGATION:
        queries[metric] = promql.gauge_by(metric, config, ["pod"], namespace="vision")
    return queries


@pytest.mark.parametrize("config", [PINNED, PINNED_EXPORTED_RATIO], ids=["namespace", "exported"])
def test_every_dcgm_selector_of_every_query_carries_the_exporter_pin(config):
    for name, query in _every_query(config).items():
        selectors = re.findall(r"DCGM_\w+\{([^}]*)\}", query)
        assert selectors, name
        for matchers in selectors:
            assert matchers.startswith('job="dcgm-exporter",instance=~"10'), (name, query)


def test_without_a_pin_no_selector_names_the_exporter():
    for name, query in _every_query(PERCENT).items():
        assert "job=" not in query, name


def test_a_clusters_pin_reaches_its_metrics_config():
    config = metrics_config(Cluster(dcgm_exporter_selector='job="nvidia-dcgm-exporter"'))
    assert promql.selector("M", config) == 'M{job="nvidia-dcgm-exporter"}'
    assert metrics_config(Cluster(dcgm_exporter_selector="")).exporter == ()


def test_shared_nodes_are_grouped_by_replicas_and_weigh_their_series():
    config = MetricsConfig(shared_nodes=MetricsConfig.shared({"s-1": 4, "s-0": 4, "w": 1}))
    assert config.shared_nodes == ((4, ("s-0", "s-1")),)
    query = promql.gpus_held_by_namespace(config)
    assert r'Hostname!~"s\\-0|s\\-1"' in query
    assert r'Hostname=~"s\\-0|s\\-1"} * 0 + 1) / 4' in query
    used = promql.gpu_seconds_used(config, period_seconds=60, resolution=60, held=True)
    # A pod's own share of the GPU's time is what it used: not divided again.
    assert r'Hostname=~"s\\-0|s\\-1"}) or ' in used


def test_mig_instances_weigh_their_profiles_slices_over_their_models():
    query = promql.gpus_held_by_namespace(PERCENT)
    assert 'modelName=~"(?i).*A30.*"} * 0 + 1), "mig_slices", "$1", "GPU_I_PROFILE"' in query
    assert ") / 4 or " in query
    assert ") / 7) * on (mig_slices) group_left ()" in query


def test_pod_gpu_kinds_counts_each_pods_series_by_node_model_and_mig_profile():
    query = promql.pod_gpu_kinds(EXPORTED, namespace="v")

    assert query.startswith(
        "count by (exported_namespace, exported_pod, Hostname, modelName, GPU_I_PROFILE) ("
    )
    assert 'exported_namespace="v"' in query
    # MIG instances are read from their engine activity, beside the whole GPUs' utilisation.
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in query
    assert "DCGM_FI_DEV_GPU_UTIL" in query
