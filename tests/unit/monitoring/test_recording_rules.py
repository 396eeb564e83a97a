"""The portal's recording rules: what they record per namespace, the queries that read them, and
how the portal tells whether they were recording over a window."""

import datetime

import yaml

from core.validators import LabelMatcher
from monitoring import promql, rules
from monitoring.promql import MetricsConfig

PERCENT = MetricsConfig()
RATIO = MetricsConfig(utilisation_metric=promql.GR_ENGINE_ACTIVE)
EXPORTED = MetricsConfig(layout=promql.LAYOUT_EXPORTED)
NOW = datetime.datetime(2026, 1, 8, tzinfo=datetime.UTC)
WEEK = promql.preset_window("7d", NOW)


def by_name(config):
    return {rule["record"]: rule for rule in promql.recording_rules(config)}


def test_the_rules_sum_and_count_each_namespaces_gpu_equivalents_and_say_they_are_loaded():
    recorded = by_name(PERCENT)
    total = recorded["namespace:dcgm_fi_dev_gpu_util:sum"]["expr"]
    count = recorded["namespace:dcgm_fi_dev_gpu_util:count"]["expr"]
    assert total.startswith("sum by (namespace) (((DCGM_FI_DEV_GPU_UTIL{")
    assert count.startswith("sum by (namespace) (((DCGM_FI_DEV_GPU_UTIL{")
    assert "* 0 + 1" in count
    assert "* 0 + 1" not in total
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in count  # MIG instances on a GPU_UTIL cluster
    assert 'namespace!=""' in total
    assert 'namespace!=""' in count
    loaded = recorded[promql.RECORDING_RULES_SERIES]
    assert loaded["expr"] == "vector(1)"
    assert loaded["labels"] == {
        "layout": "namespace",
        "utilisation_metric": "DCGM_FI_DEV_GPU_UTIL",
        "exporter": "",
        "shared_nodes": "",
        "version": promql.RECORDING_RULES_VERSION,
    }


def test_each_layout_and_metric_records_series_of_its_own():
    names = [set(by_name(c)) - {promql.RECORDING_RULES_SERIES} for c in (PERCENT, RATIO, EXPORTED)]
    assert not names[0] & names[1]
    assert not names[0] & names[2]
    assert "exported_namespace:dcgm_fi_dev_gpu_util:count" in names[2]
    assert (
        'exported_namespace!=""'
        in by_name(EXPORTED)["exported_namespace:dcgm_fi_dev_gpu_util:sum"]["expr"]
    )


def test_average_utilisation_weighs_every_gpu_sample_once_from_raw_series_or_recorded_sums():
    raw = promql.average_utilisation_by_namespace(PERCENT, WEEK)
    assert raw.startswith("sum by (namespace) (((sum_over_time(DCGM_FI_DEV_GPU_UTIL{")
    assert "[604800s])) or " in raw
    assert " / sum by (namespace) ((count_over_time(DCGM_FI_DEV_GPU_UTIL{" in raw
    recorded = promql.average_utilisation_by_namespace(PERCENT, WEEK, recorded=True)
    assert recorded == (
        "sum_over_time(namespace:dcgm_fi_dev_gpu_util:sum[604800s]) / "
        "sum_over_time(namespace:dcgm_fi_dev_gpu_util:count[604800s])"
    )


def test_a_ratio_metrics_average_is_scaled_to_percent_either_way():
    for recorded in (False, True):
        query = promql.average_utilisation_by_namespace(RATIO, WEEK, recorded=recorded)
        assert query.endswith(") * 100")
        assert "gr_engine_active" in query.lower()


def test_usage_hours_sample_the_recorded_counts_and_sums_as_they_would_every_gpus_series():
    span = {"period_seconds": 3600, "resolution": 60}
    held = promql.gpu_seconds_held(PERCENT, recorded=True, held=True, **span)
    used = promql.gpu_seconds_used(RATIO, recorded=True, namespaces=["b", "a.x"], **span)
    assert held == "sum_over_time((namespace:dcgm_fi_dev_gpu_util:count)[3599s:60s]) * 60"
    assert used == (
        'sum_over_time((namespace:dcgm_fi_prof_gr_engine_active:sum{namespace=~"a\\\\.x|b"})'
        "[3599s:60s]) * 60"
    )
    raw = promql.gpu_seconds_used(RATIO, namespaces=["b", "a.x"], **span)
    assert raw.endswith("[3599s:60s]) * 60")


def test_the_rules_cover_a_window_when_they_were_recording_at_both_ends():
    query = promql.recording_rules_cover(PERCENT, start=100, end=700)
    series = (
        'gpu_portal_recording_rules{layout="namespace",utilisation_metric="DCGM_FI_DEV_GPU_UTIL",'
        f'exporter="",shared_nodes="",version="{promql.RECORDING_RULES_VERSION}"}}'
    )
    assert query == f"{series} @ 100.000 and {series} @ 700.000"


def test_rules_recorded_from_the_exporters_series_only_serve_a_cluster_with_that_pin():
    pinned = MetricsConfig(exporter=(LabelMatcher("job", "=", "dcgm-exporter"),))
    recorded = by_name(pinned)
    assert (
        '{job="dcgm-exporter",namespace!="",GPU_I_PROFILE=""}'
        in recorded["namespace:dcgm_fi_dev_gpu_util:sum"]["expr"]
    )
    assert recorded[promql.RECORDING_RULES_SERIES]["labels"]["exporter"] == 'job="dcgm-exporter"'
    assert 'exporter="job=\\"dcgm-exporter\\""' in promql.recording_rules_cover(
        pinned, start=1, end=2
    )
    assert 'exporter=""' in promql.recording_rules_cover(PERCENT, start=1, end=2)


def test_the_cluster_wide_rules_file_carries_the_recording_rules_and_a_teams_file_does_not():
    idle = rules.low_gpu_usage_rule(PERCENT, threshold_percent=10, window_minutes=5)
    recording = rules.recording_rule_group("gpu-portal-recording", PERCENT)
    plain = yaml.safe_load(
        rules.to_yaml(rules.rules_file(rules.rule_group("idle", idle), recording))
    )
    assert [g["name"] for g in plain["groups"]] == ["idle", "gpu-portal-recording"]
    assert plain["groups"][1]["rules"] == promql.recording_rules(PERCENT)
    manifest = rules.prometheus_rule(
        rules.rule_group("idle", idle), recording, name="n", namespace="monitoring", managed_by="gp"
    )
    assert manifest["spec"]["groups"][1] == recording


def test_a_window_is_held_for_the_caches_lifetime_on_its_steps_grid():
    now = datetime.datetime(2026, 1, 1, 12, 0, 22, tzinfo=datetime.UTC)
    window = promql.preset_window("1h", now)  # a 5 s step
    start, end = window.aligned(every=15)
    assert end == now.timestamp() - 7  # 12:00:15, a whole 15 s
    assert end - start == 3600
    assert window.aligned() == (now.timestamp() - 3602, now.timestamp() - 2)


def test_a_custom_window_has_every_point_on_its_steps_grid_and_no_more_than_its_length():
    start = datetime.datetime(2026, 1, 1, 12, 0, 7, tzinfo=datetime.UTC)
    window = promql.Window(start=start, end=start + datetime.timedelta(minutes=30, seconds=1))
    aligned_start, aligned_end = window.aligned()
    assert aligned_start % window.step == 0
    assert aligned_end % window.step == 0
    assert window.seconds - window.step < aligned_end - aligned_start <= window.seconds


def test_rules_recorded_for_other_shared_nodes_do_not_cover_a_window():
    shared = MetricsConfig(shared_nodes=MetricsConfig.shared({"gpu-node-shared-0": 4}))
    assert promql.recording_rules_labels(shared)["shared_nodes"] != ""
    assert promql.recording_rules_cover(shared, start=1, end=2) != (
        promql.recording_rules_cover(PERCENT, start=1, end=2)
    )
