"""The portal's recording rules in the devcluster's Prometheus: the cluster page ranks teams by
utilisation, and the usage report measures GPU-hours, from the recorded per-namespace series
when the rules were recording over the whole window, from every GPU's series otherwise, with the
same figures; the exported rules are valid."""

import datetime
import json
import subprocess
import time

import pytest
import yaml
from django.utils import timezone

from monitoring import dashboards, metrics, promql, usage
from monitoring.metrics import metrics_config, prometheus_for
from monitoring.prometheus import record_queries
from tenants.models import Team
from tests import factories

from .pages import portal_namespace
from .workloads import eventually, forget_the_rules_ran, gpu_pod, prometheus_has, run_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

RECORDED_SUM = "namespace:dcgm_fi_dev_gpu_util:sum"


def ranking(dashboard, key="rank-utilisation") -> dict:
    chart = next(c for c in dashboard.charts if c.key == key)
    (bars,) = json.loads(chart.figure_json)["data"]
    return dict(zip(bars["y"], bars["x"], strict=True))


def utilisation_queries(records) -> list[str]:
    return [r.params["query"] for r in records if "_over_time(" in r.params["query"]]


def window(start: float, end: float) -> promql.Window:
    return promql.Window(
        start=datetime.datetime.fromtimestamp(start, datetime.UTC),
        end=datetime.datetime.fromtimestamp(end, datetime.UTC),
    )


def test_the_ranking_and_usage_read_the_recorded_series_only_where_the_rules_cover_the_window(
    devcluster, core, metrics_cluster, namespace, settings
):
    settings.MONITORING_USAGE_RESOLUTION_SECONDS = 5  # the usage report samples as Prometheus
    team = factories.TeamFactory(slug=namespace, name="Recorded Team")
    portal_namespace(team, metrics_cluster)
    devcluster.load_prometheus_rules()
    run_pod(core, namespace, gpu_pod("steady", gpus=2, utilisation=64))
    prometheus_has(devcluster, f'{RECORDED_SUM}{{namespace="{namespace}"}}')
    loaded = time.time()
    # Not running until `loaded`, as far as Prometheus' 5-minute lookback can tell.
    forget_the_rules_ran(devcluster, loaded - 400, loaded)
    time.sleep(30)  # the rules evaluate every 5 s, the pod is scraped every 5 s
    now = time.time()
    before_the_rules, covered = window(loaded - 4, now), window(loaded + 10, now)

    with record_queries() as records:
        raw = dashboards.cluster_dashboard(cluster=metrics_cluster, window=before_the_rules)
        assert ranking(raw)[team.name] == 64  # read: its queries are done
    (query,) = utilisation_queries(records)
    assert "DCGM_FI_DEV_GPU_UTIL{" in query
    assert RECORDED_SUM not in query

    with record_queries() as records:
        recorded = dashboards.cluster_dashboard(cluster=metrics_cluster, window=covered)
        assert ranking(recorded)[team.name] == 64
    (query,) = utilisation_queries(records)
    assert query.startswith(f"sum_over_time({RECORDED_SUM}[")

    # The usage report's GPU-hours: the same figures from either, two GPUs at 64% throughout.
    raw_series, recorded_series = "DCGM_FI_DEV_GPU_UTIL{", "namespace:dcgm_fi_dev_gpu_util:"
    for span, read, unread in (
        (before_the_rules, raw_series, recorded_series),
        (covered, recorded_series, raw_series),
    ):
        with record_queries() as records:
            report = usage.teams_usage_report(
                teams=Team.objects.filter(pk=team.pk),
                every_team=False,
                start=span.start,
                end=span.end,
            )
        queries = [r.params["query"] for r in records if "sum_over_time((" in r.params["query"]]
        assert len(queries) == 2
        assert all(read in q and unread not in q for q in queries), queries
        (row,) = report.rows
        held = 2 * (span.end - span.start).total_seconds() / 3600
        one_sample = 2 * 5 / 3600
        assert row.held_gpu_hours == pytest.approx(held, abs=one_sample * 1.01)
        assert row.used_gpu_hours == pytest.approx(0.64 * row.held_gpu_hours)


def test_the_rules_do_not_cover_a_metric_they_do_not_record(devcluster, metrics_cluster):
    devcluster.load_prometheus_rules()
    config = metrics_config(metrics_cluster)
    other = promql.MetricsConfig(layout=promql.LAYOUT_EXPORTED)
    now = timezone.now().timestamp()
    with prometheus_for(metrics_cluster) as prometheus:
        eventually(
            lambda: metrics.recording_rules_cover(prometheus, config, start=now, end=now),
            what="the devcluster's rules recording",
        )
        assert not metrics.recording_rules_cover(prometheus, other, start=now, end=now)


def test_the_cluster_wide_rules_file_is_valid_and_records_what_the_portal_reads(
    metrics_cluster, admin, client_as, tmp_path, promtool
):
    response = client_as(admin).get("/monitoring/clusters/devcluster/alert-rules/?format=rules")
    rules_file = tmp_path / "rules.yml"
    rules_file.write_bytes(response.content)
    check = subprocess.run(
        [promtool, "check", "rules", str(rules_file)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    idle, recording = yaml.safe_load(response.content)["groups"]
    assert [r["alert"] for r in idle["rules"]] == ["LowGPUUsage"]
    assert recording["rules"] == promql.recording_rules(metrics_config(metrics_cluster))
