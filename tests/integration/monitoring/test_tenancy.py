"""A member of team B gets nothing of team A: not its pages, not its series, not its hours.

The namespace every query filters on is the team's slug from the database; nothing in the
request can widen it."""

import datetime

import pytest
from django.utils import timezone

from tenants.models import Membership
from tests import factories

from .pages import chart_values, member_of, portal_namespace
from .workloads import eventually, gpu_pod, prometheus_has, run_pod

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


@pytest.fixture
def team_a(db, namespace, metrics_cluster):
    team = factories.TeamFactory(slug=namespace, name="Team A")
    portal_namespace(team, metrics_cluster)
    return team


@pytest.fixture
def team_b(db, other_namespace, metrics_cluster):
    team = factories.TeamFactory(slug=other_namespace, name="Team B")
    portal_namespace(team, metrics_cluster)
    return team


@pytest.fixture
def member_b(team_b):
    return member_of(team_b, "bea-b", Membership.Role.LEAD)


@pytest.fixture
def both_running(devcluster, core, team_a, team_b):
    """Each team runs a GPU pod; both are in Prometheus."""
    run_pod(core, team_a.slug, gpu_pod("secret-a", gpus=1, utilisation=61))
    run_pod(core, team_b.slug, gpu_pod("own-b", gpus=1, utilisation=22))
    for team in (team_a, team_b):
        prometheus_has(devcluster, f'DCGM_FI_DEV_GPU_UTIL{{namespace="{team.slug}"}}')


def test_team_a_pages_are_not_found_for_a_member_of_team_b(
    metrics_cluster, team_a, member_b, client_as, both_running
):
    page = client_as(member_b)
    for url in (
        f"/monitoring/teams/{team_a.slug}/",
        f"/monitoring/teams/{team_a.slug}/pods/secret-a/",
        f"/monitoring/teams/{team_a.slug}/alert-rules/",
    ):
        assert page.get(url).status_code == 404, url
    assert page.post(f"/monitoring/teams/{team_a.slug}/idle-policy/").status_code == 404


def test_team_a_api_is_not_found_for_a_member_of_team_b(
    metrics_cluster, team_a, member_b, api, both_running
):
    api.as_user(member_b)
    for url in (
        f"/api/v1/monitoring/teams/{team_a.slug}/utilisation/",
        f"/api/v1/monitoring/teams/{team_a.slug}/pods/",
    ):
        response = api.get(url)
        assert response.status_code == 404, url
        assert "secret-a" not in response.content.decode()


def test_team_b_own_page_shows_only_its_pods_whatever_the_query_string_says(
    metrics_cluster, team_a, team_b, member_b, client_as, both_running
):
    url = (
        f"/monitoring/teams/{team_b.slug}/?namespace={team_a.slug}&pod=secret-a"
        f"&team={team_a.slug}&cluster=devcluster"
    )
    response = eventually(
        lambda: (r := client_as(member_b).get(url)) and chart_values(r, "utilisation") and r,
        what="team B's chart",
    )
    assert chart_values(response, "utilisation") == {"own-b": 22}
    html = response.content.decode()
    assert "secret-a" not in html
    assert team_a.slug not in html


def test_team_b_api_series_hold_only_its_pods(
    metrics_cluster, team_a, team_b, member_b, api, both_running
):
    body = (
        api.as_user(member_b)
        .get(f"/api/v1/monitoring/teams/{team_b.slug}/utilisation/?namespace={team_a.slug}")
        .json()
    )
    assert {s["pod"] for s in body["series"]} <= {"own-b"}
    assert [p["pod"] for p in body["pods"]] == ["own-b"]


def test_the_usage_report_lists_only_the_members_teams(
    metrics_cluster, team_a, team_b, member_b, api, client_as, admin, both_running
):
    today = timezone.localdate()
    for team in (team_a, team_b):
        factories.QuotaGrantFactory(
            request__team=team,
            request__cluster=metrics_cluster,
            request__gpus=2,
            request__starts_on=today - datetime.timedelta(days=1),
            granted_by=admin,
        )
    query = f"start={today.isoformat()}&bucket=total"

    report = api.as_user(member_b).get(f"/api/v1/usage-report/?{query}").json()
    assert {row["team"] for row in report["rows"]} == {team_b.slug}

    csv_text = api.get(f"/api/v1/usage-report/?{query}&format=csv").content.decode()
    assert team_b.slug in csv_text
    assert team_a.slug not in csv_text

    page = client_as(member_b).get(f"/monitoring/usage/?{query}")
    assert team_b.slug in page.content.decode()
    assert team_a.slug not in page.content.decode()

    everyone = api.as_user(admin).get(f"/api/v1/usage-report/?{query}").json()
    assert {row["team"] for row in everyone["rows"]} >= {team_a.slug, team_b.slug}


def test_the_cluster_page_is_for_admins_only(metrics_cluster, member_b, client_as):
    assert client_as(member_b).get("/monitoring/clusters/devcluster/").status_code == 403
    assert client_as(member_b).get("/monitoring/clusters/").status_code == 403
