"""The cluster page's team rankings on a company's cluster: the teams at the ends, by their
names, and a title that says how many of how many. The values are given here; which teams
Prometheus ranks is ``test_cluster_page.py``'s."""

import datetime
import json

import pytest

from monitoring import charts, promql
from tests import factories

from .pages import portal_namespace

pytestmark = pytest.mark.integration


class Prometheus:
    identity = "prometheus-of-the-test"


@pytest.fixture
def cluster_of_500_teams(db):
    cluster = factories.ClusterFactory(name="company")
    for i in range(500):
        team = factories.TeamFactory(slug=f"team-{i:03d}", name=f"Team {i:03d}")
        portal_namespace(team, cluster)
    return cluster


def drawn(chart) -> dict[str, float]:
    bars = json.loads(chart.figure_json)["data"][0]
    return dict(zip(bars["y"], bars["x"], strict=True))


def test_a_company_sees_the_teams_holding_most_by_name(cluster_of_500_teams):
    part = charts.held_ranking_part(cluster_of_500_teams, Prometheus(), promql.MetricsConfig())

    chart = part.build({f"team-{i:03d}": float(i) for i in range(500)})

    assert drawn(chart) == {f"Team {i:03d}": i for i in range(499, 479, -1)}
    title = json.loads(chart.figure_json)["layout"]["title"]["text"]
    assert title == "GPUs held now: the 20 highest of 500 teams"


def test_a_company_sees_the_busiest_and_the_idlest_teams(cluster_of_500_teams):
    now = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.UTC)
    window = promql.preset_window("24h", now)
    part = charts.utilisation_ranking_part(
        cluster_of_500_teams, Prometheus(), promql.MetricsConfig(), window
    )

    chart = part.build({f"team-{i:03d}": i / 5 for i in range(500)})

    shown = drawn(chart)
    busiest, idlest = range(499, 489, -1), range(9, -1, -1)
    assert list(shown) == [f"Team {i:03d}" for i in [*busiest, *idlest]]
    assert shown["Team 000"] == 0
    title = json.loads(chart.figure_json)["layout"]["title"]["text"]
    assert title.endswith(": the 10 highest and 10 lowest of 500 teams")
