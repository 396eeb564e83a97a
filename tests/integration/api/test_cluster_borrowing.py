"""How a cluster's borrowers share idle GPUs (by weight, decayed by past use) and are preempted
(minimum run time, the lender's bound, the grace period), set by admins through the clusters
API (``PATCH /api/v1/clusters/{name}/``) or the cluster's queueing page: audited as one change,
every team on the cluster is reconciled (its queues made again), others are refused, and a bad
value is a 400 naming the field with nothing changed."""

import re

import pytest

from clusters.models import Cluster
from tenants.models import AuditEvent, TeamCluster
from tests import factories
from tests.integration.pages.helpers import field_error_html, queueing_form

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
        queueing_form("kueue", borrowers_share_by_weight="on", preemption_grace_seconds=90),
    )

    assert response.status_code == 302
    stored = Cluster.objects.get(pk=cluster.pk)
    assert (stored.quota_mode, stored.borrowers_share_by_weight) == ("kueue", True)
    assert stored.preemption_grace_seconds == 90
    shown = page.get(f"/clusters/{cluster.name}/queueing/").content.decode()
    assert re.search(
        r'<input type="checkbox" name="borrowers_share_by_weight"[^>]* checked>', shown
    )


BORROWING = {
    "fair_share_half_life_hours": 72,
    "fair_share_usage_scale_gpu_hours": 250,
    "borrower_min_runtime_seconds": 1200,
    "lender_wait_bound_seconds": 600,
    "preemption_grace_seconds": 120,
}


def test_an_admin_sets_decay_and_preemption_in_one_audited_change(
    api, admin, cluster, team, django_capture_on_commit_callbacks
):
    on_cluster = factories.TeamClusterFactory(team=team, cluster=cluster, status="in_sync")

    with django_capture_on_commit_callbacks(execute=False):
        response = api.as_user(admin).patch(CLUSTER, BORROWING)

    assert response.status_code == 200, response.content
    assert {field: response.json()[field] for field in BORROWING} == BORROWING
    stored = Cluster.objects.get(pk=cluster.pk)
    assert {field: getattr(stored, field) for field in BORROWING} == BORROWING
    (event,) = AuditEvent.objects.filter(action=AuditEvent.Action.CLUSTER_BORROWING_CHANGED)
    assert event.before["preemption_grace_seconds"] == 30
    assert {field: event.after[field] for field in BORROWING} == BORROWING
    assert TeamCluster.objects.get(pk=on_cluster.pk).status == "pending"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fair_share_half_life_hours", -1),
        ("fair_share_half_life_hours", 24 * 90 + 1),
        ("fair_share_usage_scale_gpu_hours", 0),
        ("borrower_min_runtime_seconds", 24 * 3600 + 1),
        ("lender_wait_bound_seconds", 0),
        ("preemption_grace_seconds", 3601),
        ("preemption_grace_seconds", "soon"),
    ],
)
def test_a_value_out_of_range_is_a_400_naming_the_field_and_nothing_changes(
    api, admin, cluster, field, value
):
    response = api.as_user(admin).patch(
        CLUSTER, {"borrowers_share_by_weight": True, "preemption_grace_seconds": 60, field: value}
    )

    assert response.status_code == 400
    assert field in response.json()
    stored = Cluster.objects.get(pk=cluster.pk)
    assert (stored.borrowers_share_by_weight, stored.preemption_grace_seconds) == (False, 30)
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.CLUSTER_BORROWING_CHANGED)


def test_the_page_shows_a_bad_value_beside_its_field(client_as, admin, cluster):
    response = client_as(admin).post(
        f"/clusters/{cluster.name}/queueing/",
        queueing_form("kueue", preemption_grace_seconds=5000),
    )

    assert response.status_code == 200
    assert "3600" in field_error_html(response, "id_preemption_grace_seconds")
    assert Cluster.objects.get(pk=cluster.pk).quota_mode == "quota"
