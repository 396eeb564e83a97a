"""Grants: who sees them, revoking and shrinking (admins), and expiry."""

import datetime

import pytest

from tenants import quota
from tenants.models import AuditEvent, QuotaGrant, TeamCluster
from tests import factories

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-grants/"


def url(grant, verb=None):
    return f"{URL}{grant.pk}/{verb}/" if verb else f"{URL}{grant.pk}/"


def fresh(grant):
    return QuotaGrant.objects.get(pk=grant.pk)


# --- reading -----------------------------------------------------------------------------------


def test_member_lists_their_teams_grants_only(api, member, grant, other_grant):
    response = api.as_user(member).get(URL)

    assert response.status_code == 200
    assert [row["id"] for row in response.data["results"]] == [grant.pk]


def test_viewer_reads_a_grant_of_their_team(api, viewer, grant):
    response = api.as_user(viewer).get(url(grant))

    assert response.status_code == 200
    assert response.data["team"] == "vision"
    assert response.data["state"] == "active"


def test_lead_of_another_team_gets_404_for_a_grant_by_id(api, other_lead, grant):
    response = api.as_user(other_lead).get(url(grant))

    assert response.status_code == 404


def test_outsider_lists_no_grants(api, outsider, grant):
    assert api.as_user(outsider).get(URL).data["count"] == 0


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("team=vision", {"grant"}),
        ("team=speech", {"other_grant"}),
        ("cluster=gpu-east", {"grant", "other_grant"}),
        ("cluster=gpu-west", set()),
        ("state=revoked", {"other_grant"}),
        ("state=active", {"grant"}),
    ],
)
def test_admin_filters_grants(api, admin, grant, other_grant, query, expected):
    QuotaGrant.objects.filter(pk=other_grant.pk).update(state="revoked")
    named = {"grant": grant.pk, "other_grant": other_grant.pk}

    response = api.as_user(admin).get(f"{URL}?{query}")

    assert {row["id"] for row in response.data["results"]} == {named[n] for n in expected}


# --- revoke ------------------------------------------------------------------------------------


def test_admin_revokes_a_grant_and_the_team_is_reconciled(
    api, admin, grant, team, cluster, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.as_user(admin).post(url(grant, "revoke"), {"note": "Project ended."})

    assert response.status_code == 200
    assert response.data["state"] == "revoked"
    assert response.data["ended_at"] is not None
    event = AuditEvent.objects.get(action="quota_grant.revoked")
    assert (event.before["state"], event.after["state"], event.note) == (
        "active",
        "revoked",
        "Project ended.",
    )
    assert TeamCluster.objects.get(team=team, cluster=cluster).reconcile_requested_at
    assert len(callbacks) == 1


@pytest.mark.parametrize("user_fixture", ["lead", "member", "viewer"])
def test_team_members_cannot_revoke_their_grant(api, request, grant, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).post(url(grant, "revoke"), {})

    assert response.status_code == 403
    assert response.data["detail"] == "Only portal admins can revoke grants."
    assert fresh(grant).state == "active"


def test_lead_of_another_team_gets_404_revoking_a_grant_they_cannot_see(api, other_lead, grant):
    response = api.as_user(other_lead).post(url(grant, "revoke"), {})

    assert response.status_code == 404


@pytest.mark.parametrize("state", ["revoked", "expired"])
def test_revoking_a_grant_that_is_not_active_is_409(api, admin, grant, state):
    QuotaGrant.objects.filter(pk=grant.pk).update(state=state)

    response = api.as_user(admin).post(url(grant, "revoke"), {})

    assert response.status_code == 409
    assert response.data["detail"] == f"Cannot revoke quota grant #{grant.pk}: it is {state}."


# --- shrink ------------------------------------------------------------------------------------


def test_admin_shrinks_a_grants_gpus(api, admin, grant, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.as_user(admin).post(url(grant, "shrink"), {"gpus": 2, "note": "Idle."})

    assert response.status_code == 200
    assert response.data["gpus"] == 2
    event = AuditEvent.objects.get(action="quota_grant.shrunk")
    assert (event.before["gpus"], event.after["gpus"]) == (4, 2)
    assert len(callbacks) == 1


def test_admin_ends_a_grant_sooner(api, admin, grant, today):
    sooner = today + datetime.timedelta(days=3)

    response = api.as_user(admin).post(url(grant, "shrink"), {"ends_on": sooner.isoformat()})

    assert response.status_code == 200
    assert fresh(grant).ends_on == sooner


def test_shrinking_upward_is_400_on_gpus(api, admin, grant):
    response = api.as_user(admin).post(url(grant, "shrink"), {"gpus": 5})

    assert response.status_code == 400
    assert response.data == {
        "gpus": ["Can only shrink: the grant has 4 GPUs. Ask for more with a new request."]
    }
    assert fresh(grant).gpus == 4


def test_extending_a_grant_is_400_on_ends_on(api, admin, grant):
    later = grant.ends_on + datetime.timedelta(days=1)

    response = api.as_user(admin).post(url(grant, "shrink"), {"ends_on": later.isoformat()})

    assert response.status_code == 400
    assert list(response.data) == ["ends_on"]


@pytest.mark.parametrize("gpus", [0, -1, "some"])
def test_shrinking_to_a_non_positive_or_non_integer_count_is_400_on_gpus(api, admin, grant, gpus):
    response = api.as_user(admin).post(url(grant, "shrink"), {"gpus": gpus})

    assert response.status_code == 400
    assert list(response.data) == ["gpus"]


def test_shrinking_with_nothing_to_change_is_400(api, admin, grant):
    response = api.as_user(admin).post(url(grant, "shrink"), {"gpus": 4})

    assert response.status_code == 400
    assert response.data == {
        "non_field_errors": ["Nothing to change: give fewer GPUs or an earlier end."]
    }


def test_lead_cannot_shrink_their_grant(api, lead, grant):
    response = api.as_user(lead).post(url(grant, "shrink"), {"gpus": 1})

    assert response.status_code == 403
    assert response.data["detail"] == "Only portal admins can shrink grants."


def test_lead_of_another_team_gets_404_shrinking_a_grant_they_cannot_see(api, other_lead, grant):
    response = api.as_user(other_lead).post(url(grant, "shrink"), {"gpus": 1})

    assert response.status_code == 404
    assert fresh(grant).gpus == 4


@pytest.mark.parametrize("state", ["revoked", "expired"])
def test_shrinking_a_grant_that_is_not_active_is_409(api, admin, grant, state):
    QuotaGrant.objects.filter(pk=grant.pk).update(state=state)

    response = api.as_user(admin).post(url(grant, "shrink"), {"gpus": 1})

    assert response.status_code == 409
    assert response.data["detail"] == f"Cannot change quota grant #{grant.pk}: it is {state}."


# --- expiry ------------------------------------------------------------------------------------


@pytest.fixture
def lapsed_grant(team, cluster, lead, admin, today):
    """Active, but its last day was yesterday."""
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__starts_on=today - datetime.timedelta(days=10),
        request__ends_on=today - datetime.timedelta(days=1),
        granted_by=admin,
    )


def test_expired_grant_reads_as_expired_with_an_audit_event(api, lead, lapsed_grant):
    expired = quota.quota_grants_expire()

    response = api.as_user(lead).get(url(lapsed_grant))
    events = api.get("/api/v1/audit-events/?action=quota_grant.expired")

    assert expired == [lapsed_grant.pk]
    assert response.data["state"] == "expired"
    (event,) = events.data["results"]
    assert event["actor"] is None
    assert (event["before"]["state"], event["after"]["state"]) == ("active", "expired")


def test_expiry_leaves_grants_that_still_run(api, lead, grant, lapsed_grant):
    quota.quota_grants_expire()

    response = api.as_user(lead).get(f"{URL}?state=active")

    assert [row["id"] for row in response.data["results"]] == [grant.pk]


def test_expired_grant_cannot_be_revoked(api, admin, lapsed_grant):
    quota.quota_grants_expire()

    response = api.as_user(admin).post(url(lapsed_grant, "revoke"), {})

    assert response.status_code == 409
