"""Membership changes read back from the database: a removal deletes the membership, audits it
and marks the team's namespace on each of its clusters for a reconcile (which takes the member's
RoleBinding away: tests/integration/reconcile/test_membership_rbac.py); a refused change leaves
memberships, markers and the audit trail as they were."""

import pytest

from tenants.models import AuditEvent, Membership, TeamCluster
from tests import factories

pytestmark = pytest.mark.django_db

MEMBERS = "/api/v1/teams/vision/members/"


def everything_a_membership_change_writes() -> dict:
    return {
        "memberships": list(Membership.objects.order_by("pk").values("pk", "user", "role")),
        "team_clusters": list(TeamCluster.objects.order_by("pk").values()),
        "audit": list(AuditEvent.objects.order_by("pk").values_list("pk", "action")),
    }


@pytest.fixture
def on_cluster(team, cluster):
    """The team's namespace on the cluster, in sync."""
    return factories.TeamClusterFactory(
        team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC
    )


def test_removing_a_member_deletes_the_membership_and_asks_for_a_reconcile(
    api, admin, team, member, on_cluster
):
    response = api.as_user(admin).delete(f"{MEMBERS}mo-member/")

    assert response.status_code == 204
    assert not Membership.objects.filter(team=team, user=member).exists()
    (removed,) = AuditEvent.objects.filter(action=AuditEvent.Action.MEMBERSHIP_REMOVED)
    assert (removed.actor, removed.team) == (admin, team)
    assert removed.before["role"] == "member"
    assert removed.after is None
    on_cluster.refresh_from_db()
    assert on_cluster.status == TeamCluster.Status.PENDING
    assert on_cluster.reconcile_requested_at is not None


def test_changing_a_role_is_saved_and_asks_for_a_reconcile(api, admin, team, member, on_cluster):
    response = api.as_user(admin).patch(f"{MEMBERS}mo-member/", {"role": "viewer"})

    assert response.status_code == 200
    assert Membership.objects.get(team=team, user=member).role == "viewer"
    on_cluster.refresh_from_db()
    assert on_cluster.reconcile_requested_at is not None


REFUSED = [
    # (who, method, path, body, status)
    ("lead", "patch", "mo-member/", {"role": "lead"}, 403),
    ("lead", "delete", "mo-member/", None, 403),
    ("lead", "post", "", {"username": "oscar-outsider", "role": "member"}, 403),
    ("member", "delete", "vic-viewer/", None, 403),
    ("other_lead", "delete", "mo-member/", None, 404),
    ("other_lead", "post", "", {"username": "otto-other-lead", "role": "lead"}, 404),
    ("admin", "delete", "oscar-outsider/", None, 404),
    ("admin", "post", "", {"username": "nobody", "role": "member"}, 400),
    ("admin", "patch", "mo-member/", {"role": "owner"}, 400),
]


@pytest.mark.parametrize(
    ("who", "method", "path", "body", "status"),
    REFUSED,
    ids=[
        f"{who}-{method}-{path.strip('/') or 'members'}-{s}" for who, method, path, _, s in REFUSED
    ],
)
def test_a_refused_membership_change_changes_nothing(
    request, api, team, member, viewer, outsider, on_cluster, who, method, path, body, status
):
    user = request.getfixturevalue(who)
    before = everything_a_membership_change_writes()

    response = getattr(api.as_user(user), method)(f"{MEMBERS}{path}", body)

    assert response.status_code == status, response.data
    assert everything_a_membership_change_writes() == before
