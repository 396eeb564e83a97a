"""What schedules a reconcile, and where its outcome shows. Database only: no cluster here."""

import datetime

import pytest
from django.utils import timezone

from clusters.models import Cluster
from reconcile import tasks
from tenants import reconcile_triggers, services
from tenants.models import Membership, TeamCluster
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_cluster(team, cluster):
    """Team A has been reconciled on the cluster before."""
    return factories.TeamClusterFactory(
        team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC
    )


def scheduled(callbacks) -> int:
    hook = "request_reconcile_after_commit"
    return sum(hook in getattr(c, "__qualname__", "") for c in callbacks)


def test_adding_a_member_schedules_a_reconcile_on_each_cluster_of_the_team(
    admin, team, on_cluster, django_capture_on_commit_callbacks
):
    user = factories.UserFactory(username="newcomer")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.membership_set(actor=admin, team=team, user=user, role=Membership.Role.MEMBER)

    assert scheduled(callbacks) == 1
    on_cluster.refresh_from_db()
    assert on_cluster.status == TeamCluster.Status.PENDING
    assert on_cluster.reconcile_requested_at is not None


def test_changing_a_role_and_removing_a_member_schedule_a_reconcile(
    admin, team, member, on_cluster, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as changed:
        services.membership_set(actor=admin, team=team, user=member, role=Membership.Role.VIEWER)
    with django_capture_on_commit_callbacks(execute=False) as removed:
        services.membership_remove(actor=admin, team=team, user=member)

    assert (scheduled(changed), scheduled(removed)) == (1, 1)


def test_setting_the_same_role_again_schedules_nothing(
    admin, team, member, on_cluster, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.membership_set(actor=admin, team=team, user=member, role=Membership.Role.MEMBER)

    assert scheduled(callbacks) == 0


def test_a_team_on_no_cluster_schedules_nothing(admin, team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.membership_set(
            actor=admin, team=team, user=factories.UserFactory(), role=Membership.Role.MEMBER
        )

    assert scheduled(callbacks) == 0
    assert not TeamCluster.objects.exists()


def test_the_sweep_expires_grants_and_reconciles_every_team_and_every_cluster(
    admin, team, other_team, cluster, monkeypatch
):
    yesterday = timezone.localdate() - datetime.timedelta(days=1)
    due = factories.QuotaGrantFactory(
        team=team,
        cluster=cluster,
        request__starts_on=yesterday - datetime.timedelta(days=3),
        request__ends_on=yesterday,
    )
    factories.TeamClusterFactory(team=team, cluster=cluster)
    factories.TeamClusterFactory(team=other_team, cluster=cluster)
    gone = factories.TeamFactory(slug="gone")
    factories.TeamClusterFactory(team=gone, cluster=cluster, namespace_deleted_at=timezone.now())
    enqueued, clusters = [], []
    monkeypatch.setattr(
        reconcile_triggers, "enqueue_reconcile_now", lambda **ids: enqueued.append(ids)
    )
    monkeypatch.setattr(
        reconcile_triggers, "enqueue_cluster_reconcile_now", lambda **ids: clusters.append(ids)
    )

    count = tasks.reconcile_sweep()

    every_cluster = list(Cluster.objects.order_by("pk").values_list("pk", flat=True))
    assert cluster.pk in every_cluster
    assert count == 2 + len(every_cluster)
    assert sorted(e["team_id"] for e in enqueued) == sorted([team.pk, other_team.pk])
    # Every cluster's admission policies (and Kueue objects) too, in any quota mode.
    assert clusters == [{"cluster_id": pk} for pk in every_cluster]
    due.refresh_from_db()
    assert due.state == "expired"


# --- where the outcome shows ---------------------------------------------------------------------


@pytest.fixture
def failing(team, cluster):
    now = timezone.now()
    return factories.TeamClusterFactory(
        team=team,
        cluster=cluster,
        status=TeamCluster.Status.ERROR,
        last_error_at=now,
        last_error="Cannot reach the API server of cluster gpu-east (https://x): MaxRetryError.",
        applied_quota={"requests.nvidia.com/gpu": "4", "pods": "100"},
        last_applied_at=now - datetime.timedelta(minutes=5),
        consecutive_failures=3,
    )


def test_the_api_shows_each_cluster_state_of_a_team_to_its_members(api, member, team, failing):
    response = api.as_user(member).get(f"/api/v1/teams/{team.slug}/clusters/")

    assert response.status_code == 200
    (state,) = response.json()["results"]
    assert state["cluster"] == "gpu-east"
    assert state["namespace"] == "vision"
    assert (state["status"], state["in_sync"], state["recovered"]) == ("error", False, False)
    assert state["last_error"].startswith("Cannot reach the API server")
    assert state["applied_quota"] == {"requests.nvidia.com/gpu": "4", "pods": "100"}
    assert state["consecutive_failures"] == 3
    detail = api.as_user(member).get(f"/api/v1/teams/{team.slug}/clusters/gpu-east/")
    assert detail.json() == state


def test_another_team_cannot_see_the_state(api, other_lead, team, failing):
    response = api.as_user(other_lead).get(f"/api/v1/teams/{team.slug}/clusters/")

    assert response.status_code == 404


def test_only_admins_delete_a_namespace(api, lead, team, failing):
    response = api.as_user(lead).post(
        f"/api/v1/teams/{team.slug}/clusters/gpu-east/delete-namespace/", {"confirm": "vision"}
    )

    assert response.status_code == 403
    assert response.json()["detail"] == "Only portal admins can delete a team's namespace."


def test_the_team_page_shows_the_state_and_the_error_in_words(client_as, member, team, failing):
    html = client_as(member).get(f"/teams/{team.slug}/").content.decode()

    assert 'data-testid="cluster-status"' in html
    assert "Error" in html
    assert "Cannot reach the API server of cluster gpu-east" in html
    assert "requests.nvidia.com/gpu: 4" in html


def test_the_team_page_says_when_a_cluster_recovered(client_as, member, team, failing):
    TeamCluster.objects.filter(pk=failing.pk).update(
        status=TeamCluster.Status.IN_SYNC, last_applied_at=timezone.now(), consecutive_failures=0
    )
    html = client_as(member).get(f"/teams/{team.slug}/").content.decode()

    assert "In sync" in html
    assert "recovered" in html
    assert "Recovered from, at" in html
