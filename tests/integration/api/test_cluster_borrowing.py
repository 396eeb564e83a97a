"""Whether a cluster's borrowers share idle GPUs by weight, set by admins through the clusters
API (``PATCH /api/v1/clusters/{name}/``) or the cluster's queueing page: audited, every team on
the cluster is reconciled (its opportunistic queue made again), others are refused, and a value
other than true or false is a 400 naming the field."""

import re

import pytest

from clusters.models import Cluster
from tenants.models import AuditEvent, TeamCluster
from tests import factories

pytestmark = pytest.mark.django_db

CLUSTER = "/api/v1/clusters/gpu-east/"


def test_an_admin_turns_it_on_audited_and_every_team_is_reconciled(
    api, admin, cluster, team, django_capture_on_commit_callbacks
):
    on_cluster = factories.TeamClusterFactory(team=team, cluster=cluster, status="in_sync")

    with django_capture_on_commit_callbacks(execute=False):
        response = api.as_user(admin).patch(CLUSTER, {"borrowers_share_by_weight": True})

    assert response.status_code == 200, response.content
    assert response.json()["borrowers_share_by_weight"] is True
    assert Cluster.objects.get(pk=cluster.pk).borrowers_share_by_weight is True
    (event,) = AuditEvent.objects.filter(action=AuditEvent.Action.CLUSTER_BORROWING_CHANGED)
    assert (
        event.before["borrowers_share_by_weight"],
        event.after["borrowers_share_by_weight"],
    ) == (
        False,
        True,
    )
    assert TeamCluster.objects.get(pk=on_cluster.pk).status == "pending"


@pytest.mark.parametrize("value", ["yes", 1, None, "on"])
def test_anything_but_true_or_false_is_a_400_naming_the_field(api, admin, cluster, value):
    response = api.as_user(admin).patch(CLUSTER, {"borrowers_share_by_weight": value})

    assert response.status_code == 400
    assert "borrowers_share_by_weight" in response.json()
    assert Cluster.objects.get(pk=cluster.pk).borrowers_share_by_weight is False


@pytest.mark.parametrize("user_fixture", ["lead", "member"])
def test_only_admins_change_it(api, request, cluster, user_fixture):
    response = api.as_user(request.getfixturevalue(user_fixture)).patch(
        CLUSTER, {"borrowers_share_by_weight": True}
    )

    assert response.status_code == 403
    assert Cluster.objects.get(pk=cluster.pk).borrowers_share_by_weight is False


def test_the_queueing_page_sets_it_beside_the_mode(client_as, admin, cluster):
    page = client_as(admin)

    response = page.post(
        f"/clusters/{cluster.name}/queueing/",
        {"quota_mode": "kueue", "borrowers_share_by_weight": "on"},
    )

    assert response.status_code == 302
    stored = Cluster.objects.get(pk=cluster.pk)
    assert (stored.quota_mode, stored.borrowers_share_by_weight) == ("kueue", True)
    shown = page.get(f"/clusters/{cluster.name}/queueing/").content.decode()
    assert re.search(
        r'<input type="checkbox" name="borrowers_share_by_weight"[^>]* checked>', shown
    )
