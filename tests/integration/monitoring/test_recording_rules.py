"""The portal's recording rules in the devcluster's Prometheus: the cluster page ranks teams by
utilisation from the recorded per-namespace series when the rules were recording over the whole
window, from every GPU's series otherwise, with the same figure; the exported rules are valid."""

import datetime
import json
import subprocess
import time

import httpx
import pytest
import yaml
from django.utils import timezone

from monitoring import charts, dashboards, promql
from monitoring.metrics import metrics_config, prometheus_for
from monitoring.prometheus import record_queries
from tests import factories

from .pages import portal_namespace
from .workloads import eventually, gpu_pod, prometheus_has, run_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

RECORDED_SUM = "namespace:dcgm_fi_dev_gpu_util:sum"


def ranking(dashboard, key="rank-utilisation") -> dict:
    chart = next(c for c in dashboard.charts if c.key == key)
    (bars,) = json.loads(chart.figure_json)["data"]
    return dict(zip(bars["y"], bars["x"], strict=True))


def utilisation_queries(records) -> list[str]:
    return [r.params["query"] for r in records if "_over_time(" in r.params["query"]]


def forget_the_rules_ran(devcluster, start: float, end: float) -> None:
    """Delete the series that says the rules were running, between ``start`` and ``end``: as
    if Prometheus had not loaded them then. (A window of another session's starting then is
    ranked from the raw series meanwhile, with the same figure.)"""
    httpx.post(
        f"{devcluster.prometheus_url}/api/v1/admin/tsdb/delete_series",
        params={"match[]": promql.RECORDING_RULES_SERIES, "start": start, "end": end},
        timeout=30,
    ).raise_for_status()


def window(start: float, end: float) -> promql.Window:
    return promql.Window(
        start=datetime.datetime.fromtimestamp(start, datetime.UTC),
        end=datetime.datetime.fromtimestamp(end, datetime.UTC),
    )


def test_the_ranking_reads_the_recorded_series_only_where_the_rules_cover_the_window(
    devcluster, core, metrics_cluster, namespace
):
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


def test_the_rules_do_not_cover_a_metric_they_do_not_record(devcluster, metrics_cluster):
    devcluster.load_prometheus_rules()
    config = metrics_config(metrics_cluster)
    other = promql.MetricsConfig(layout=promql.LAYOUT_EXPORTED)
    now = timezone.now().timestamp()
    with prometheus_for(metrics_cluster) as prometheus:
        eventually(
            lambda: charts.recording_rules_cover(prometheus, config, start=now, end=now),
            what="the devcluster's rules recording",
        )
        assert not charts.recording_rules_cover(prometheus, other, start=now, end=now)


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
