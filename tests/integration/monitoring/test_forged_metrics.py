"""DCGM series that a tenant forges never count: not in the team's charts, its pods' idle
verdict, the idle check (and so the automatic stops), the usage report or the exported alert
rule.

A tenant's pod that Prometheus scrapes may publish ``DCGM_FI_DEV_GPU_UTIL`` with any labels. Here
the devcluster's Prometheus scrapes such a "pod" for real (``devcluster.tenant_metrics``: a
second scrape job, ``tenant-pods``, as a real cluster scrapes annotated pods): it claims an idle
GPU held by ``forged-job`` in the victim team's namespace, and even says ``job="dcgm-exporter"``
(which Prometheus, not honouring a scraped pod's labels, files as ``exported_job``). The team
really runs one pod, ``real-job``, at 55%. The cluster pins the exporter (the default
``job="dcgm-exporter"``); each test also shows that with the pin emptied the forged series
would count, so that it can fail.

The forged series must be a whole idle window old before the idle rule judges it: the window is
one minute, and the wait is paid once for the module.
"""

import datetime
import time
from types import SimpleNamespace

import pytest
import yaml
from django.utils import timezone

from monitoring import idle, promql
from monitoring.metrics import pod_usage, prometheus_for
from monitoring.models import IdlePod, IdlePolicy
from monitoring.usage import usage_report
from tenants.models import Membership
from tests import factories

from .pages import chart_values, member_of, portal_namespace
from .workloads import (
    create_team_namespace,
    delete_namespace,
    delete_series,
    eventually,
    gpu_pod,
    prometheus_has,
    run_pod,
)

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

WINDOW_MINUTES = 1
FORGED_READINGS = {
    promql.GPU_UTIL: 0,
    promql.FB_USED: 70000,
    promql.POWER: 350,
    promql.TEMPERATURE: 90,
}


def forged_exposition(namespace: str) -> str:
    """What the tenant's pod publishes: one idle A100 held by ``forged-job`` in ``namespace``."""
    labels = (
        'gpu="0",UUID="GPU-00000000-0000-0000-0000-00000000f0f0",device="nvidia0",'
        f'modelName="NVIDIA A100-SXM4-80GB",Hostname="forged-node",namespace="{namespace}",'
        'pod="forged-job",container="main",job="dcgm-exporter"'
    )
    lines = []
    for metric, value in FORGED_READINGS.items():
        lines += [f"# TYPE {metric} gauge", f"{metric}{{{labels}}} {value}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def forged(devcluster, core):
    """The victim's namespace with its real pod, and the forged series in Prometheus; returned
    once the idle rule, unpinned, judges both pods."""
    namespace = create_team_namespace(core, "forged")
    try:
        run_pod(core, namespace, gpu_pod("real-job", gpus=1, utilisation=55))
        started = time.time()
        with devcluster.tenant_metrics(forged_exposition(namespace)):
            unpinned = promql.pod_average_utilisation(
                promql.MetricsConfig(), window_minutes=WINDOW_MINUTES, namespace=namespace
            )
            judged = prometheus_has(devcluster, unpinned, count=2, timeout=180)
            assert {s["metric"]["pod"] for s in judged} == {"real-job", "forged-job"}
            yield SimpleNamespace(namespace=namespace, started=started)
    finally:
        delete_namespace(core, namespace)
        delete_series(devcluster, f'{{namespace="{namespace}"}}')


@pytest.fixture
def cluster(metrics_cluster):
    metrics_cluster.idle_window_minutes = WINDOW_MINUTES
    metrics_cluster.save()
    assert metrics_cluster.dcgm_exporter_selector == 'job="dcgm-exporter"'  # the default
    return metrics_cluster


def unpin(cluster):
    cluster.dcgm_exporter_selector = ""
    cluster.save()


@pytest.fixture
def team(db, forged, cluster):
    team = factories.TeamFactory(slug=forged.namespace, name="Victim")
    portal_namespace(team, cluster)
    return team


@pytest.fixture
def lead(team):
    return member_of(team, "vic-lead", Membership.Role.LEAD)


def test_the_forged_series_is_really_in_prometheus_under_another_job(devcluster, forged, db):
    # ``db``: pytest-django runs the tests without a database after the others, which would
    # make the module's ``forged`` (a minute's wait) twice.
    (series,) = devcluster.prometheus_query(
        f'{promql.GPU_UTIL}{{namespace="{forged.namespace}",pod="forged-job"}}'
    )
    assert series["metric"]["job"] == "tenant-pods"
    assert series["metric"]["exported_job"] == "dcgm-exporter"


def test_the_team_charts_show_only_the_exporters_series(cluster, team, lead, client_as):
    page = client_as(lead)
    url = f"/monitoring/teams/{team.slug}/?window=1h&cluster={cluster.name}"

    def charted(pods: set[str]):
        # Waits out a scrape in which the simulator could not see the pod (other sessions
        # restart the shared API server): then the last point says 0 GPUs held.
        response = page.get(url)
        held = chart_values(response, "held").get("GPUs held")
        return (
            set(chart_values(response, "utilisation")) == pods and held == len(pods) and (response)
        )

    response = eventually(lambda: charted({"real-job"}), what="the real pod alone charted")

    for key in ("utilisation", "memory", "power", "temperature"):
        assert set(chart_values(response, key)) == {"real-job"}, key
    assert chart_values(response, "utilisation")["real-job"] == 55
    dashboard = response.context["dashboard"]
    assert [p.pod for p in dashboard.pods] == ["real-job"]
    assert dashboard.gpus_held == 1

    unpin(cluster)
    eventually(lambda: charted({"real-job", "forged-job"}), what="the forged pod charted too")


def pods_judged(cluster, namespace: str) -> list[tuple[str, bool]]:
    with prometheus_for(cluster) as prometheus:
        return [(p.pod, p.idle) for p in pod_usage(prometheus, cluster, namespace=namespace)]


def test_the_idle_verdict_and_the_idle_check_ignore_the_forged_pod(cluster, team, lead):
    IdlePolicy.objects.create(team=team, stop_after_minutes=2, warn_minutes_before_stop=1)
    real_alone = [("real-job", False)]
    eventually(lambda: pods_judged(cluster, team.slug) == real_alone, what="the real pod judged")

    result = idle.idle_check_cluster(cluster=cluster)

    assert result.error == ""
    assert result.idle == []
    assert not IdlePod.objects.filter(team=team).exists()

    unpin(cluster)
    both = [("forged-job", True), ("real-job", False)]
    eventually(lambda: pods_judged(cluster, team.slug) == both, what="the forged pod judged")
    assert idle.idle_check_cluster(cluster=cluster).idle == [f"{team.slug}/forged-job"]


def test_the_usage_report_counts_only_the_exporters_gpu_hours(
    cluster, team, lead, forged, settings
):
    settings.MONITORING_USAGE_RESOLUTION_SECONDS = 5
    now = timezone.now()
    start = now - datetime.timedelta(minutes=30)

    def held_hours() -> float:
        (row,) = usage_report(user=lead, start=start, end=now, strict=True, now=now).rows
        return row.held_gpu_hours

    pinned = held_hours()
    unpin(cluster)
    unpinned = held_hours()

    # The real pod holds one GPU since shortly before ``forged.started``; the forged GPU "held"
    # one from then on, for at least the idle window the fixture waited.
    real_at_most = (now.timestamp() - forged.started + 120) / 3600
    assert 0 < pinned <= real_at_most
    assert unpinned - pinned >= (WINDOW_MINUTES * 60 - 10) / 3600


def test_the_exported_alert_rule_does_not_fire_for_the_forged_pod(
    devcluster, cluster, team, lead, client_as
):
    def firing_pods() -> set[str]:
        response = client_as(lead).get(
            f"/monitoring/teams/{team.slug}/alert-rules/?cluster={cluster.name}&format=rules"
        )
        (rule,) = yaml.safe_load(response.content)["groups"][0]["rules"]
        assert ('job="dcgm-exporter"' in rule["expr"]) == bool(cluster.dcgm_exporter_selector)
        return {s["metric"]["pod"] for s in devcluster.prometheus_query(rule["expr"])}

    assert firing_pods() == set()
    unpin(cluster)
    assert firing_pods() == {"forged-job"}
