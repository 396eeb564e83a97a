"""The fair share of idle GPUs as members read it: on the team page (a section per Kueue
cluster), on a waiting opportunistic job's page and from ``GET /api/v1/teams/{slug}/fair-share/``;
other teams named only for portal admins. And the reconcile's side: the decayed use lowers the
weight the team's opportunistic ClusterQueue borrows with. Database only."""

import datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import QuotaMode
from clusters.vocabulary import GUARANTEED, OPPORTUNISTIC
from gpujobs import fair_share_reads
from gpujobs.models import GpuJob
from reconcile import desired_state
from tests import factories

pytestmark = pytest.mark.django_db

A100 = "NVIDIA-A100-SXM4-80GB"
State = GpuJob.State


def opportunistic(team, cluster, *, state, hours=None, gpus=1, **fields):
    """An opportunistic A100 job; ``hours=(a, b)``: it ran from a to b hours ago (b None: still
    running)."""
    now = timezone.now()
    if hours is not None:
        fields["started_at"] = now - datetime.timedelta(hours=hours[0])
        if hours[1] is not None:
            fields["finished_at"] = now - datetime.timedelta(hours=hours[1])
    return factories.GpuJobFactory(
        team=team, cluster=cluster, priority=GpuJob.Priority.OPPORTUNISTIC, gpus=gpus,
        gpu_model=A100, state=state, **fields,
    )  # fmt: skip


@pytest.fixture
def borrowers(cluster, team, other_team):
    """On a Kueue cluster that halves use every 24 h: vision (weight 1) used 8 A100s from 12 to
    2 hours ago (66 decayed GPU-h) and waits; speech (weight 1) used nothing and waits too, since
    later; nlp (weight 2) borrows 1 A100 now and waits for none."""
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.fair_share_half_life_hours = 24
    cluster.fair_share_usage_scale_gpu_hours = 100
    cluster.save()
    nlp = factories.TeamFactory(slug="nlp", name="NLP")
    for t in (team, other_team, nlp):
        factories.TeamClusterFactory(team=t, cluster=cluster)
    factories.TeamQueuePolicyFactory(team=nlp, cluster=cluster, fair_sharing_weight=Decimal(2))
    opportunistic(team, cluster, state=State.SUCCEEDED, gpus=8, hours=(12, 2))
    waiting = opportunistic(team, cluster, state=State.PENDING)
    opportunistic(other_team, cluster, state=State.PENDING)
    opportunistic(nlp, cluster, state=State.RUNNING, hours=(1, None))
    return waiting


def test_the_reconcile_lowers_the_opportunistic_queue_weight_by_decayed_use(
    cluster, team, other_team, borrowers
):
    policies = desired_state.queue_policies(team_ids=[team.pk, other_team.pk], cluster=cluster)

    assert policies[team.pk].weight(OPPORTUNISTIC) == Decimal("0.602")  # 1 / (1 + 66 / 100)
    assert policies[team.pk].weight(GUARANTEED) == Decimal(1)
    assert policies[other_team.pk].weight(OPPORTUNISTIC) == Decimal(1)


def test_with_decay_off_every_queue_borrows_with_its_plain_weight(cluster, team, borrowers):
    cluster.fair_share_half_life_hours = 0
    cluster.save()

    policy = desired_state.queue_policies(team_ids=[team.pk], cluster=cluster)[team.pk]

    assert policy.borrowing_weight is None
    assert policy.weight(OPPORTUNISTIC) == Decimal(1)


def test_a_member_sees_the_team_behind_another_team_and_why(client_as, member, borrowers):
    page = client_as(member).get("/teams/vision/").content.decode()

    assert 'data-testid="fair-share-cluster" data-cluster="gpu-east"' in page
    assert (
        "vision is 2nd of 2 waiting teams for a borrowed A100: another team goes first (its "
        "decayed use 0 GPU-h is lower than vision&#x27;s 66 GPU-h"
    ) in page
    assert "speech" not in page
    assert "nlp" not in page
    assert 'data-testid="chart-fair-share-' in page


def test_an_admin_sees_the_other_teams_names(client_as, admin, borrowers):
    page = client_as(admin).get("/teams/vision/").content.decode()

    assert "speech goes first" in page


def test_a_waiting_opportunistic_job_page_shows_its_team_turn(client_as, member, borrowers):
    page = client_as(member).get(f"/jobs/{borrowers.pk}/").content.decode()

    assert 'data-testid="fair-share-sentence"' in page
    assert "vision is 2nd of 2 waiting teams" in page


@pytest.mark.parametrize("page", ["job", "team"])
def test_a_page_with_the_fair_share_loads_the_chart_scripts_once(
    client_as, member, borrowers, page
):
    url = f"/jobs/{borrowers.pk}/" if page == "job" else "/teams/vision/"

    html = client_as(member).get(url).content.decode()

    assert 'data-testid="chart-fair-share-' in html
    assert html.count('<script src="/static/plotly/plotly.min.js" defer></script>') == 1
    assert html.count('<script src="/static/monitoring/charts.js" defer></script>') == 1


def test_a_guaranteed_job_page_has_no_fair_share(client_as, member, cluster, team, borrowers):
    job = factories.GpuJobFactory(team=team, cluster=cluster, state=State.PENDING)

    page = client_as(member).get(f"/jobs/{job.pk}/").content.decode()

    assert 'data-testid="fair-share"' not in page


def test_the_api_answers_the_figures_and_the_line(api, member, borrowers):
    response = api.as_user(member).get("/api/v1/teams/vision/fair-share/")

    assert response.status_code == 200
    assert response.json()["team"] == "vision"
    (standing,) = response.json()["clusters"]
    assert standing["cluster"] == "gpu-east"
    assert standing["half_life_hours"] == 24
    assert standing["team"]["weight"] == "1.000"
    assert standing["team"]["effective_weight"] == "0.602"
    assert standing["team"]["decayed_use_gpu_hours"] == 66
    assert standing["team"]["borrowed_gpus"] == 0
    assert standing["rank"] == 2
    assert standing["waiting_teams"] == 2
    assert [b["team"] for b in standing["line"]] == ["another team", "vision"]
    assert len(standing["history"]) == fair_share_reads.HISTORY_DAYS
    assert standing["history"][-1]["decayed_use_gpu_hours"] == pytest.approx(66, abs=1)


def test_nlp_borrowing_now_counts_in_its_share(api, admin, borrowers):
    standing = api.as_user(admin).get("/api/v1/teams/nlp/fair-share/").json()["clusters"][0]

    assert standing["team"]["borrowed_gpus"] == 1
    # 1 GPU over its weight 2, lowered a little by the hour it has borrowed it: 2 / 1.01
    assert standing["team"]["effective_weight"] == "1.980"
    assert standing["team"]["share"] == pytest.approx(1 / 1.98)
    assert standing["rank"] is None


def test_another_teams_fair_share_is_a_404(api, member, other_team, borrowers):
    assert api.as_user(member).get("/api/v1/teams/speech/fair-share/").status_code == 404


def test_the_explainer_reads_a_constant_number_of_queries(
    cluster, team, member, borrowers, django_assert_max_num_queries
):
    for i in range(10):
        other = factories.TeamFactory(slug=f"more-{i}")
        factories.TeamClusterFactory(team=other, cluster=cluster)
        opportunistic(other, cluster, state=State.PENDING)
        opportunistic(other, cluster, state=State.SUCCEEDED, hours=(5, 4))

    with CaptureQueriesContext(connection) as queries:
        (standing,) = fair_share_reads.team_fair_share(user=member, team=team)

    assert len(queries) <= 4
    assert standing.waiting_teams == 12


def test_the_api_costs_the_same_queries_for_more_clusters_teams_and_jobs(
    api, member, team, borrowers
):
    client = api.as_user(member)
    with CaptureQueriesContext(connection) as few:
        client.get("/api/v1/teams/vision/fair-share/")
    for i in range(3):
        more = factories.ClusterFactory(name=f"more-{i}", quota_mode=QuotaMode.KUEUE)
        factories.TeamClusterFactory(team=team, cluster=more)
        for j in range(4):
            other = factories.TeamFactory(slug=f"other-{i}-{j}")
            factories.TeamClusterFactory(team=other, cluster=more)
            opportunistic(other, more, state=State.PENDING)

    with CaptureQueriesContext(connection) as many:
        response = client.get("/api/v1/teams/vision/fair-share/")

    assert len(response.json()["clusters"]) == 4
    assert len(many) == len(few)


def test_the_api_names_an_unknown_cluster_in_a_400(api, member, borrowers):
    response = api.as_user(member).get("/api/v1/teams/vision/fair-share/?cluster=nowhere")

    assert response.status_code == 400
    assert "nowhere" in str(response.json()["cluster"])
