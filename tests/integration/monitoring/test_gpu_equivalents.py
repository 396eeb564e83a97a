"""GPUs granted and held in one unit, GPU equivalents, wherever they meet: the team page's
figures and its held-vs-granted chart, the usage report's granted hours, and what an idle
notice says a pod holds. Prometheus is a stand-in answering the portal's own queries (the
devcluster tests read the real one); grants, capacity rows and episodes are in PostgreSQL."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from clusters.vocabulary import SHARED_GPU_RESOURCE
from monitoring import charts, dashboards, idle, promql, selectors, usage
from monitoring.metrics import metrics_config
from monitoring.models import IdlePod, Notification
from monitoring.prometheus import Sample, Series
from tenants.models import Membership
from tests import factories

from .pages import figure_on_page, member_of, portal_namespace

pytestmark = [pytest.mark.integration]

A100 = "NVIDIA-A100-SXM4-80GB"
SHARED_A100 = f"{A100}-SHARED"
DCGM_A100 = "NVIDIA A100-SXM4-80GB"


@pytest.fixture
def cluster(db):
    cluster = factories.ClusterFactory(
        name="east", prometheus_url="http://prometheus.invalid:9090", shared_gpu_replicas={}
    )
    # The capacity sync's record: the shared A100s are split four ways.
    factories.GpuModelCapacityFactory(
        cluster=cluster, resource_name=SHARED_GPU_RESOURCE, gpu_model=SHARED_A100, replicas=4
    )
    return cluster


@pytest.fixture
def team(cluster):
    team = factories.TeamFactory(slug="vision", name="Vision")
    portal_namespace(team, cluster)
    return team


def grant(team, cluster, *, gpus, resource, model, days_ago=0):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__gpus=gpus,
        request__gpu_resource=resource,
        request__gpu_model=model,
        request__starts_on=timezone.localdate() - datetime.timedelta(days=days_ago),
        request__ends_on=None,
    )


def slices(team, cluster, **kwargs):
    return grant(team, cluster, gpus=4, resource="nvidia.com/mig-1g.10gb", model=A100, **kwargs)


def replicas(team, cluster, **kwargs):
    return grant(team, cluster, gpus=2, resource=SHARED_GPU_RESOURCE, model=SHARED_A100, **kwargs)


class FakePrometheus:
    """Answers the queries of the team page and the idle check for a namespace whose pod
    ``nb`` holds four 1g.10gb slices of an A100 at 2% utilisation."""

    identity = "fake-prometheus"

    def __init__(self, config, namespace):
        self.held = promql.gpus_held(config, namespace=namespace)
        self.namespace = namespace

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def query_range(self, query, *, start, end, step):
        if query == self.held:
            return [Series({}, [start, end], [4 / 7, 4 / 7])]
        return []

    def query(self, query, *, at=None):
        pod = {"namespace": self.namespace, "pod": "nb"}
        if query.startswith("count by"):
            labels = {
                **pod,
                promql.NODE_LABEL: "mig-0",
                promql.MODEL_LABEL: DCGM_A100,
                promql.MIG_PROFILE_LABEL: "1g.10gb",
            }
            return [Sample(labels, 4.0)]
        return [Sample(pod, 2.0)]


@pytest.fixture
def prometheus(monkeypatch, settings, cluster, team):
    settings.MONITORING_CACHE_SECONDS = 0
    fake = FakePrometheus(metrics_config(cluster), team.slug)
    monkeypatch.setattr(dashboards, "dashboard_prometheus", lambda cluster: fake)
    monkeypatch.setattr(idle, "prometheus_for", lambda cluster, **kwargs: fake)
    return fake


def test_units_granted_stay_a_count_and_equivalents_weigh_slices_and_replicas(team, cluster):
    slices(team, cluster)
    replicas(team, cluster)

    assert selectors.gpus_granted_now(team=team, cluster=cluster) == 6
    assert selectors.gpu_equivalents_granted_now(team=team, cluster=cluster) == pytest.approx(
        4 / 7 + 2 / 4
    )


def test_a_shared_grant_of_no_model_takes_the_fewest_replicas_of_its_cluster(team, cluster):
    factories.GpuModelCapacityFactory(
        cluster=cluster, resource_name=SHARED_GPU_RESOURCE, gpu_model="H100-SHARED", replicas=2
    )
    grant(team, cluster, gpus=2, resource=SHARED_GPU_RESOURCE, model="")

    assert selectors.gpu_equivalents_granted_now(team=team, cluster=cluster) == 1


def test_the_held_vs_granted_chart_draws_the_grant_in_gpu_equivalents(
    team, cluster, prometheus, client_as
):
    """A team holding all of its 4 x 1g.10gb holds 4/7 under a ceiling of 4/7, not of 4."""
    slices(team, cluster)
    lead = member_of(team, "lena-lead", Membership.Role.LEAD)

    response = client_as(lead).get(f"/monitoring/teams/{team.slug}/?cluster=east")

    assert response.status_code == 200
    dashboard = response.context["dashboard"]
    assert dashboard.gpus_granted == 4
    assert dashboard.gpu_equivalents_granted == pytest.approx(4 / 7)
    assert dashboard.gpus_held == pytest.approx(4 / 7)
    figure = figure_on_page(response, "held")
    assert figure["layout"]["shapes"][0]["y0"] == pytest.approx(4 / 7)
    assert figure["layout"]["annotations"][0]["text"] == "granted: 0.57"
    html = response.content.decode()
    assert 'data-testid="gpus-held">0.57<' in html
    assert 'data-testid="gpus-granted">0.57 ' in html
    assert "4 × 1g.10gb slices (4/7 GPU)" in html


def test_the_team_api_keeps_gpus_granted_a_count_and_adds_the_equivalents(
    team, cluster, prometheus, monkeypatch, api
):
    slices(team, cluster)
    lead = member_of(team, "lena-lead", Membership.Role.LEAD)
    monkeypatch.setattr(dashboards, "prometheus_for", lambda cluster, **kwargs: prometheus)

    body = api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/utilisation/").json()

    assert body["gpus_granted"] == 4
    assert body["gpu_equivalents_granted"] == pytest.approx(4 / 7)
    (pod,) = body["pods"]
    assert (pod["gpus"], pod["gpu_equivalents"]) == (4, pytest.approx(4 / 7))
    assert pod["gpus_described"] == "4 × 1g.10gb slices (4/7 GPU)"


def test_an_idle_notice_names_the_slices_a_pod_holds(team, cluster, prometheus):
    lead = member_of(team, "lena-lead", Membership.Role.LEAD)

    result = idle.idle_check_cluster(cluster=cluster)

    assert result.notified == [f"{team.slug}/nb"]
    episode = IdlePod.objects.get(team=team)
    assert (episode.gpus, episode.gpu_equivalents) == (4, pytest.approx(4 / 7))
    (note,) = Notification.objects.filter(user=lead)
    assert "holds 4 × 1g.10gb slices (4/7 GPU) on east" in note.body
    assert "GPU(s)" not in note.body


def test_usage_report_granted_hours_are_gpu_equivalents(team, cluster, admin):
    cluster.prometheus_url = ""
    cluster.save()
    slices(team, cluster, days_ago=2)
    replicas(team, cluster, days_ago=2)
    tz = timezone.get_current_timezone()
    start = datetime.datetime.combine(
        timezone.localdate() - datetime.timedelta(days=2), datetime.time(), tzinfo=tz
    )
    end = start + datetime.timedelta(days=1)

    report = usage.usage_report(user=admin, start=start, end=end, now=end)

    (row,) = report.rows
    # A day of four sevenths and of two quarters of a GPU, not of six GPUs.
    assert row.granted_gpu_hours == pytest.approx(24 * (4 / 7 + 2 / 4))
    assert sorted(row.hours_by_grant) == [pytest.approx(48), pytest.approx(96)]  # units
    assert {g.replicas for g in row.grants} == {1, 4}


def test_the_held_chart_part_keys_its_cache_by_the_equivalents_granted(cluster, prometheus):
    end = timezone.now()
    window = promql.Window(start=end - datetime.timedelta(hours=1), end=end, label="1h")
    config = metrics_config(cluster)
    parts = [
        charts.held_part(prometheus, config, window, namespace="vision", granted=g, empty="")
        for g in (4 / 7, 4)
    ]

    assert parts[0].cache_key != parts[1].cache_key
