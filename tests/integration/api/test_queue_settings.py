"""How a cluster queues work, set by admins: its quota mode (switching asks for a reconcile of
every team on it and of its cluster-wide objects, and can be switched back) and each team's
queue policy (borrowing and lending limits within the cluster's GPUs, a weight above 0).
Both audited; bad input is a 400 naming the field."""

from decimal import Decimal

import pytest
from django.utils import timezone

from clusters.models import Cluster
from tenants.models import AuditEvent, ClusterState, TeamCluster, TeamQueuePolicy
from tests import factories

pytestmark = pytest.mark.django_db

CLUSTER = "/api/v1/clusters/gpu-east/"


def policy_url(team="vision", cluster="gpu-east"):
    return f"/api/v1/teams/{team}/queue-policies/{cluster}/"


# --- quota mode --------------------------------------------------------------------------------


def test_admin_switches_the_cluster_to_kueue_and_every_team_on_it_is_reconciled(
    api, admin, cluster, team, other_team, grant
):
    factories.TeamClusterFactory(team=other_team, cluster=cluster, status="in_sync")
    gone = factories.TeamClusterFactory(
        team=factories.TeamFactory(slug="gone"),
        cluster=cluster,
        namespace_deleted_at=timezone.now(),
    )

    response = api.as_user(admin).patch(CLUSTER, {"quota_mode": "kueue"})

    assert response.status_code == 200
    assert response.data["quota_mode"] == "kueue"
    assert Cluster.objects.get(pk=cluster.pk).quota_mode == "kueue"
    asked = TeamCluster.objects.filter(
        cluster=cluster, status=TeamCluster.Status.PENDING, reconcile_requested_at__isnull=False
    )
    assert sorted(asked.values_list("team__slug", flat=True)) == ["speech", "vision"]
    gone.refresh_from_db()
    assert gone.reconcile_requested_at is None
    assert ClusterState.objects.get(cluster=cluster).status == ClusterState.Status.PENDING


def test_switching_the_mode_is_audited_and_can_be_switched_back(api, admin, cluster):
    api.as_user(admin).patch(CLUSTER, {"quota_mode": "kueue"})

    response = api.patch(CLUSTER, {"quota_mode": "quota"})

    assert response.status_code == 200
    assert response.data["quota_mode"] == "quota"
    events = AuditEvent.objects.filter(action="cluster.quota_mode_changed").order_by("id")
    assert [(e.before["quota_mode"], e.after["quota_mode"]) for e in events] == [
        ("quota", "kueue"),
        ("kueue", "quota"),
    ]
    assert events[0].actor == admin


def test_setting_the_mode_it_already_has_changes_nothing(api, admin, cluster):
    response = api.as_user(admin).patch(CLUSTER, {"quota_mode": "quota"})

    assert response.status_code == 200
    assert not AuditEvent.objects.filter(action="cluster.quota_mode_changed").exists()


@pytest.mark.parametrize("user_fixture", ["lead", "member", "outsider"])
def test_only_admins_switch_the_mode(api, request, cluster, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).patch(CLUSTER, {"quota_mode": "kueue"})

    assert response.status_code == 403
    assert Cluster.objects.get(pk=cluster.pk).quota_mode == "quota"


@pytest.mark.parametrize("mode", ["volcano", "", 3])
def test_an_unknown_mode_is_400_naming_quota_mode(api, admin, cluster, mode):
    response = api.as_user(admin).patch(CLUSTER, {"quota_mode": mode})

    assert response.status_code == 400
    assert list(response.data) == ["quota_mode"]


def test_a_patch_with_nothing_to_change_is_400(api, admin, cluster):
    response = api.as_user(admin).patch(CLUSTER, {})

    assert response.status_code == 400


# --- queue policies ----------------------------------------------------------------------------


def test_admin_sets_a_teams_queue_policy(api, admin, cluster, team):
    body = {"borrowing_limit": 4, "lending_limit": 2, "fair_sharing_weight": "2.5"}

    response = api.as_user(admin).put(policy_url(), body)

    assert response.status_code == 200
    assert response.data["team"] == "vision"
    assert response.data["cluster"] == "gpu-east"
    assert (response.data["borrowing_limit"], response.data["lending_limit"]) == (4, 2)
    assert response.data["fair_sharing_weight"] == "2.500"
    assert response.data["updated_by"] == "ada-admin"
    policy = TeamQueuePolicy.objects.get(team=team, cluster=cluster)
    assert policy.fair_sharing_weight == Decimal("2.5")


def test_setting_a_policy_is_audited_and_reconciles_the_team(api, admin, cluster, team):
    api.as_user(admin).put(policy_url(), {"borrowing_limit": 4})

    api.put(policy_url(), {"borrowing_limit": None, "lending_limit": 0})

    events = AuditEvent.objects.filter(action="team_queue_policy.set").order_by("id")
    assert (events[0].before, events[0].after["borrowing_limit"]) == (None, 4)
    assert (events[1].before["borrowing_limit"], events[1].after["borrowing_limit"]) == (4, None)
    assert events[1].after["lending_limit"] == 0
    assert events[1].team == team
    state = TeamCluster.objects.get(team=team, cluster=cluster)
    assert state.status == TeamCluster.Status.PENDING


def test_members_read_their_teams_policies(api, member, cluster, team):
    factories.TeamQueuePolicyFactory(team=team, cluster=cluster, borrowing_limit=3)

    listed = api.as_user(member).get("/api/v1/teams/vision/queue-policies/")
    one = api.get(policy_url())

    assert [p["borrowing_limit"] for p in listed.data["results"]] == [3]
    assert one.status_code == 200
    assert one.data["borrowing_limit"] == 3


@pytest.mark.parametrize("user_fixture", ["lead", "member"])
def test_team_members_may_not_set_a_policy_whatever_the_body(api, request, cluster, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).put(policy_url(), {"borrowing_limit": -5})

    assert response.status_code == 403
    assert "Only portal admins" in response.data["detail"]
    assert not TeamQueuePolicy.objects.exists()


def test_another_teams_policy_is_a_404(api, other_lead, cluster, team):
    assert api.as_user(other_lead).get(policy_url()).status_code == 404
    assert api.put(policy_url(), {"borrowing_limit": 1}).status_code == 404


def test_a_policy_on_an_unknown_cluster_is_a_404(api, admin, cluster, team):
    response = api.as_user(admin).put(policy_url(cluster="nowhere"), {"borrowing_limit": 1})

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"borrowing_limit": -1}, "borrowing_limit"),
        ({"borrowing_limit": 17}, "borrowing_limit"),  # gpu-east has 16 GPUs
        ({"lending_limit": -3}, "lending_limit"),
        ({"lending_limit": 1000}, "lending_limit"),
        ({"borrowing_limit": "many"}, "borrowing_limit"),
        ({"fair_sharing_weight": "0"}, "fair_sharing_weight"),
        ({"fair_sharing_weight": "-1"}, "fair_sharing_weight"),
        ({"fair_sharing_weight": "1000.5"}, "fair_sharing_weight"),
        ({"fair_sharing_weight": "abc"}, "fair_sharing_weight"),
        ({"fair_sharing_weight": "1.0001"}, "fair_sharing_weight"),
    ],
)
def test_bad_limits_and_weights_are_400_naming_the_field(api, admin, cluster, team, body, field):
    response = api.as_user(admin).put(policy_url(), body)

    assert response.status_code == 400
    assert list(response.data) == [field]
    assert not TeamQueuePolicy.objects.exists()


def test_the_limit_may_be_the_clusters_whole_capacity(api, admin, cluster, team):
    response = api.as_user(admin).put(policy_url(), {"borrowing_limit": 16, "lending_limit": 16})

    assert response.status_code == 200


def test_an_archived_team_gets_no_policy(api, admin, cluster, team):
    team.archived_at = timezone.now()
    team.save()

    response = api.as_user(admin).put(policy_url(), {"borrowing_limit": 1})

    assert response.status_code == 400
    assert list(response.data) == ["team"]
