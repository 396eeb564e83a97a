"""Decisions change what they name, read back from the database rather than the answer: a
partial approval grants the smaller figures and approves the request with the note, a rejection
and a cancel write their decision and grant nothing, and every refused decision (400, 403, 404,
409) leaves the request, the grants, the reconcile markers and the audit trail as they were."""

import datetime

import pytest

from tenants import quota
from tenants.models import AuditEvent, QuotaGrant, QuotaRequest, TeamCluster
from tests import factories

pytestmark = pytest.mark.django_db


def url(quota_request, verb):
    return f"/api/v1/quota-requests/{quota_request.pk}/{verb}/"


def request_row(quota_request) -> dict:
    return QuotaRequest.objects.values(
        "state", "decided_by__username", "decided_at", "decision_note"
    ).get(pk=quota_request.pk)


def everything_a_decision_writes() -> dict:
    return {
        "requests": list(
            QuotaRequest.objects.order_by("pk").values(
                "pk", "state", "decided_by", "decided_at", "decision_note"
            )
        ),
        "grants": list(QuotaGrant.objects.order_by("pk").values()),
        "team_clusters": list(TeamCluster.objects.order_by("pk").values()),
        "audit": list(AuditEvent.objects.order_by("pk").values_list("pk", "action")),
    }


# --- decisions that go through -----------------------------------------------------------------


def test_a_partial_approval_grants_the_smaller_figures_and_approves_the_request_with_the_note(
    api, admin, pending_request, today
):
    sooner = today + datetime.timedelta(days=7)

    response = api.as_user(admin).post(
        url(pending_request, "approve"),
        {"gpus": 2, "ends_on": sooner.isoformat(), "note": "Two for a week."},
    )

    assert response.status_code == 201, response.data
    grant = QuotaGrant.objects.get(request=pending_request)
    assert (grant.gpus, grant.starts_on, grant.ends_on) == (2, pending_request.starts_on, sooner)
    assert (grant.state, grant.granted_by) == (QuotaGrant.State.ACTIVE, admin)
    assert response.data["id"] == grant.pk
    decided = request_row(pending_request)
    assert decided["state"] == QuotaRequest.State.APPROVED
    assert decided["decided_by__username"] == admin.username
    assert decided["decided_at"] is not None
    assert decided["decision_note"] == "Two for a week."
    approved = AuditEvent.objects.get(action=AuditEvent.Action.QUOTA_REQUEST_APPROVED)
    assert (approved.target_id, approved.note) == (pending_request.pk, "Two for a week.")
    activated = AuditEvent.objects.get(action=AuditEvent.Action.QUOTA_GRANT_ACTIVATED)
    assert (activated.after["gpus"], activated.after["ends_on"]) == (2, sooner.isoformat())


def test_rejecting_writes_the_decision_and_grants_nothing(api, admin, pending_request):
    response = api.as_user(admin).post(url(pending_request, "reject"), {"note": "Not now."})

    assert response.status_code == 200
    decided = request_row(pending_request)
    assert decided["state"] == QuotaRequest.State.REJECTED
    assert decided["decided_by__username"] == admin.username
    assert decided["decision_note"] == "Not now."
    assert not QuotaGrant.objects.exists()
    assert not TeamCluster.objects.exists()  # nothing to reconcile


def test_cancelling_cancels_the_request_and_grants_nothing(api, lead, pending_request):
    response = api.as_user(lead).post(url(pending_request, "cancel"))

    assert response.status_code == 200
    decided = request_row(pending_request)
    assert decided["state"] == QuotaRequest.State.CANCELLED
    assert decided["decided_at"] is not None
    assert not QuotaGrant.objects.exists()
    assert not TeamCluster.objects.exists()
    (event,) = AuditEvent.objects.filter(action=AuditEvent.Action.QUOTA_REQUEST_CANCELLED)
    assert (event.actor, event.target_id) == (lead, pending_request.pk)
    assert (event.before["state"], event.after["state"]) == ("pending", "cancelled")


def test_another_lead_cancelling_leaves_it_cancelled(api, team, pending_request):
    co_lead = factories.UserFactory(username="cora-co-lead")
    factories.MembershipFactory(team=team, user=co_lead, role="lead")

    assert api.as_user(co_lead).post(url(pending_request, "cancel")).status_code == 200

    assert request_row(pending_request)["state"] == QuotaRequest.State.CANCELLED


def test_approving_part_of_a_too_big_request_grants_that_part(api, admin, team, cluster, lead):
    big = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=20)

    assert api.as_user(admin).post(url(big, "approve"), {"gpus": 16}).status_code == 201

    assert QuotaGrant.objects.get(request=big).gpus == 16
    assert request_row(big)["state"] == QuotaRequest.State.APPROVED


# --- refused decisions change nothing ----------------------------------------------------------


def _pending(team, cluster, lead, admin):
    return factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=4)


def _too_big(team, cluster, lead, admin):
    return factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=20)


def _the_admins_own(team, cluster, lead, admin):
    return factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=admin, gpus=4)


def _approved(team, cluster, lead, admin):
    quota_request = _pending(team, cluster, lead, admin)
    quota.quota_request_approve(reviewer=admin, quota_request=quota_request, note="Yes.")
    return quota_request


def _rejected(team, cluster, lead, admin):
    quota_request = _pending(team, cluster, lead, admin)
    return quota.quota_request_reject(reviewer=admin, quota_request=quota_request, note="No.")


def _cancelled(team, cluster, lead, admin):
    quota_request = _pending(team, cluster, lead, admin)
    return quota.quota_request_cancel(actor=lead, quota_request=quota_request)


LATER = "9999-12-31"
BEFORE_THE_START = "2000-01-01"

REFUSED = [
    # (who, the request, verb, body, status)
    ("admin", _pending, "approve", {"gpus": 5}, 400),
    ("admin", _pending, "approve", {"gpus": 0}, 400),
    ("admin", _pending, "approve", {"gpus": "two"}, 400),
    ("admin", _pending, "approve", {"ends_on": LATER}, 400),
    ("admin", _pending, "approve", {"ends_on": BEFORE_THE_START}, 400),
    ("admin", _too_big, "approve", {}, 400),
    ("admin", _pending, "reject", {"note": "  "}, 400),
    ("lead", _pending, "approve", {}, 403),
    ("member", _pending, "approve", {}, 403),
    ("viewer", _pending, "reject", {"note": "No."}, 403),
    ("admin", _the_admins_own, "approve", {}, 403),
    ("admin", _the_admins_own, "reject", {"note": "No."}, 403),
    ("member", _pending, "cancel", {}, 403),
    ("viewer", _pending, "cancel", {}, 403),
    ("other_lead", _pending, "approve", {}, 404),
    ("other_lead", _pending, "reject", {"note": "No."}, 404),
    ("other_lead", _pending, "cancel", {}, 404),
    ("outsider", _pending, "cancel", {}, 404),
    ("admin", _approved, "approve", {}, 409),
    ("admin", _approved, "reject", {"note": "No."}, 409),
    ("lead", _approved, "cancel", {}, 409),
    ("admin", _rejected, "approve", {}, 409),
    ("lead", _rejected, "cancel", {}, 409),
    ("admin", _cancelled, "approve", {}, 409),
    ("admin", _cancelled, "reject", {"note": "No."}, 409),
]


@pytest.mark.parametrize(
    ("who", "make", "verb", "body", "status"),
    REFUSED,
    ids=[
        f"{who}-{make.__name__.strip('_')}-{verb}-{status}"
        for who, make, verb, _, status in REFUSED
    ],
)
def test_a_refused_decision_leaves_the_request_grants_and_audit_trail_as_they_were(
    request, api, team, cluster, lead, admin, who, make, verb, body, status
):
    quota_request = make(team, cluster, lead, admin)
    user = request.getfixturevalue(who)
    before = everything_a_decision_writes()

    response = api.as_user(user).post(url(quota_request, verb), body)

    assert response.status_code == status, response.data
    assert everything_a_decision_writes() == before
