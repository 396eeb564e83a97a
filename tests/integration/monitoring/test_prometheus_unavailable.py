"""Prometheus down, slow or answering with an error: pages say so in place of the charts, the
API answers 503 with the reason. Never a 500. The devcluster's shared Prometheus is left alone
(other tests read it): these clusters point at a Prometheus of the test's own that it stops and
starts or pauses, a path of it that is not its API, or a closed port."""

import pytest

from tenants.models import Membership
from tests import factories
from tests.integration.conftest import free_port

from .pages import member_of, portal_namespace
from .workloads import OwnPrometheus

pytestmark = [pytest.mark.integration]

CHARTS = ("utilisation", "memory", "power", "temperature", "held")


@pytest.fixture
def team(db):
    return factories.TeamFactory(slug="down-team", name="Down Team")


@pytest.fixture
def lead(team):
    return member_of(team, "dora-lead", Membership.Role.LEAD)


def point_cluster_at(url: str, team):
    cluster = factories.ClusterFactory(name="broken", prometheus_url=url)
    portal_namespace(team, cluster)
    return cluster


@pytest.fixture
def own_prometheus(tmp_path):
    prometheus = OwnPrometheus(tmp_path)
    prometheus.start()
    yield prometheus
    if prometheus.process.poll() is None:
        prometheus.stop()


def test_stopping_prometheus_gives_the_message_and_the_503_until_it_is_back(
    team, lead, api, client_as, own_prometheus
):
    point_cluster_at(own_prometheus.url, team)
    utilisation = f"/api/v1/monitoring/teams/{team.slug}/utilisation/"
    page = client_as(lead)
    assert api.as_user(lead).get(utilisation).status_code == 200
    assert (
        'data-testid="metrics-error"'
        not in page.get(f"/monitoring/teams/{team.slug}/").content.decode()
    )

    own_prometheus.stop()

    response = api.get(utilisation)
    assert response.status_code == 503
    assert response.json()["reason"] == "unreachable"
    html = page.get(f"/monitoring/teams/{team.slug}/").content.decode()
    assert 'data-testid="metrics-error"' in html
    assert "GPU metrics are unavailable right now" in html

    own_prometheus.start()

    assert api.get(utilisation).status_code == 200


def test_an_unreachable_prometheus_gives_the_message_on_every_chart(team, lead, client_as):
    point_cluster_at(f"http://127.0.0.1:{free_port()}", team)

    response = client_as(lead).get(f"/monitoring/teams/{team.slug}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="metrics-error"' in html
    assert "GPU metrics are unavailable right now" in html
    assert "cannot be reached" in html
    dashboard = response.context["dashboard"]
    assert [c.key for c in dashboard.charts if c.failed] == list(CHARTS)
    assert 'type="application/json"' not in html  # no figure at all, only messages


def test_an_unreachable_prometheus_is_a_503_with_its_reason(team, lead, api):
    point_cluster_at(f"http://127.0.0.1:{free_port()}", team)
    api.as_user(lead)

    for url in (
        f"/api/v1/monitoring/teams/{team.slug}/utilisation/",
        f"/api/v1/monitoring/teams/{team.slug}/pods/",
        "/api/v1/usage-report/",
    ):
        response = api.get(url)
        assert response.status_code == 503, url
        assert response.json()["reason"] == "unreachable"
        assert "cannot be reached" in response.json()["detail"]
        assert response["Retry-After"] == "30"


def test_a_slow_prometheus_is_a_timeout(team, lead, api, client_as, settings, start_prometheus):
    settings.MONITORING_PROMETHEUS_TIMEOUT = 1
    prometheus = start_prometheus()
    point_cluster_at(prometheus.url, team)
    prometheus.pause()  # it takes connections and never answers

    response = api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/utilisation/")
    assert response.status_code == 503
    assert response.json()["reason"] == "timeout"

    page = client_as(lead).get(f"/monitoring/teams/{team.slug}/")
    assert page.status_code == 200
    assert "did not answer within 1 s" in page.content.decode()


def test_a_prometheus_error_is_shown_with_its_reason(team, lead, api, client_as, start_prometheus):
    # A real Prometheus at a URL without its API (a path that is not its route prefix): every
    # query is answered 404 in plain text.
    point_cluster_at(f"{start_prometheus().url}/not-prometheus", team)

    response = api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/utilisation/")
    assert response.status_code == 503
    assert response.json()["reason"] == "query_error"
    assert "answered HTTP 404 without a JSON body" in response.json()["detail"]

    page = client_as(lead).get(f"/monitoring/teams/{team.slug}/")
    assert page.status_code == 200
    assert "answered HTTP 404 without a JSON body" in page.content.decode()


def test_the_cluster_page_and_usage_report_render_with_the_message(team, admin, client_as):
    point_cluster_at(f"http://127.0.0.1:{free_port()}", team)
    page = client_as(admin)

    cluster = page.get("/monitoring/clusters/broken/")
    assert cluster.status_code == 200
    html = cluster.content.decode()
    assert "GPU metrics are unavailable right now" in html
    assert "cannot be read right now" in html  # no kubeconfig either: the nodes say so too

    usage = page.get("/monitoring/usage/")
    assert usage.status_code == 200
    assert 'data-testid="usage-error"' in usage.content.decode()


def test_no_prometheus_configured_is_a_503_not_configured(team, lead, api, client_as):
    factories.ClusterFactory(name="no-metrics", prometheus_url="")

    response = api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/utilisation/")
    assert response.status_code == 503
    assert response.json()["reason"] == "not_configured"
    page = client_as(lead).get(f"/monitoring/teams/{team.slug}/")
    assert page.status_code == 200
    assert 'data-testid="no-metrics"' in page.content.decode()
