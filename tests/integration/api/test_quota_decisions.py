"""Deciding on requests: approve, reject, cancel, the review queue, capacity and the hook."""

import datetime

import pytest

from tenants.models import AuditEvent, QuotaGrant, QuotaRequest, TeamCluster
from tests import factories

pytestmark = pytest.mark.django_db


def url(quota_request, verb):
    return f"/api/v1/quota-requests/{quota_request.pk}/{verb}/"


def state_of(quota_request):
    return QuotaRequest.objects.get(pk=quota_request.pk).state


# --- approve -----------------------------------------------------------------------------------


def test_admin_approves_a_request_and_gets_the_grant(api, admin, pending_request):
    response = api.as_user(admin).post(url(pending_request, "approve"), {})

    assert response.status_code == 201
    assert response.data["state"] == "active"
    assert response.data["gpus"] == 4
    assert response.data["request"] == pending_request.pk
    assert response.data["granted_by"] == "ada-admin"
    assert state_of(pending_request) == "approved"


def test_approval_records_audit_events_with_before_and_after(api, admin, pending_request):
    api.as_user(admin).post(url(pending_request, "approve"), {"note": "Go."})

    approved = AuditEvent.objects.get(action="quota_request.approved")
    activated = AuditEvent.objects.get(action="quota_grant.activated")
    assert (approved.before["state"], approved.after["state"]) == ("pending", "approved")
    assert approved.actor == admin
    assert approved.note == "Go."
    assert activated.before is None
    assert activated.after["gpus"] == 4


def test_approval_marks_the_team_for_reconcile_and_enqueues_it_after_commit(
    api, admin, pending_request, team, cluster, django_capture_on_commit_callbacks
):
    # The callbacks are captured, not run: no worker or broker is needed to see the hook fired.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.as_user(admin).post(url(pending_request, "approve"), {})

    assert response.status_code == 201
    marker = TeamCluster.objects.get(team=team, cluster=cluster)
    assert marker.reconcile_requested_at is not None
    (enqueue,) = callbacks
    assert "request_reconcile_after_commit" in getattr(enqueue, "__qualname__", repr(enqueue))


def test_admin_approves_fewer_gpus_for_a_shorter_period(api, admin, pending_request, today):
    shorter = today + datetime.timedelta(days=7)

    response = api.as_user(admin).post(
        url(pending_request, "approve"), {"gpus": 2, "ends_on": shorter.isoformat()}
    )

    assert response.status_code == 201
    grant = QuotaGrant.objects.get(request=pending_request)
    assert (grant.gpus, grant.ends_on) == (2, shorter)


def test_approving_more_gpus_than_requested_is_400_on_gpus(api, admin, pending_request):
    response = api.as_user(admin).post(url(pending_request, "approve"), {"gpus": 5})

    assert response.status_code == 400
    assert response.data == {"gpus": ["Can approve at most the 4 GPUs requested."]}
    assert state_of(pending_request) == "pending"


def test_approving_a_longer_period_is_400_on_ends_on(api, admin, pending_request):
    later = pending_request.ends_on + datetime.timedelta(days=1)

    response = api.as_user(admin).post(
        url(pending_request, "approve"), {"ends_on": later.isoformat()}
    )

    assert response.status_code == 400
    assert list(response.data) == ["ends_on"]
    assert "shorten" in response.data["ends_on"][0]


def test_approving_with_an_end_before_the_start_is_400_on_ends_on(api, admin, pending_request):
    before = pending_request.starts_on - datetime.timedelta(days=1)

    response = api.as_user(admin).post(
        url(pending_request, "approve"), {"ends_on": before.isoformat()}
    )

    assert response.status_code == 400
    assert list(response.data) == ["ends_on"]


@pytest.mark.parametrize("gpus", [0, -2, "two", 1.5])
def test_approving_a_non_positive_or_non_integer_gpu_count_is_400_on_gpus(
    api, admin, pending_request, gpus
):
    response = api.as_user(admin).post(url(pending_request, "approve"), {"gpus": gpus})

    assert response.status_code == 400
    assert list(response.data) == ["gpus"]


@pytest.mark.parametrize("user_fixture", ["lead", "member", "viewer"])
def test_team_members_cannot_approve(api, request, pending_request, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).post(url(pending_request, "approve"), {})

    assert response.status_code == 403
    assert response.data["detail"] == "Only portal admins can approve or reject quota requests."
    assert state_of(pending_request) == "pending"


def test_lead_of_another_team_gets_404_approving_a_request_they_cannot_see(
    api, other_lead, pending_request
):
    response = api.as_user(other_lead).post(url(pending_request, "approve"), {})

    assert response.status_code == 404


def test_admin_who_leads_the_team_cannot_approve_their_own_request(api, team, cluster):
    admin_lead = factories.AdminFactory(username="ada-also-lead")
    factories.MembershipFactory(team=team, user=admin_lead, role="lead")
    own = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=admin_lead)

    response = api.as_user(admin_lead).post(url(own, "approve"), {})

    assert response.status_code == 403
    assert response.data["detail"] == "You cannot decide on a quota request you made yourself."
    assert state_of(own) == "pending"


def test_admin_cannot_reject_their_own_request(api, admin, team, cluster):
    own = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=admin)

    response = api.as_user(admin).post(url(own, "reject"), {"note": "No."})

    assert response.status_code == 403


# --- capacity ----------------------------------------------------------------------------------


@pytest.fixture
def big_request(team, cluster, lead):
    """20 GPUs on a cluster with 16."""
    return factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=20)


def test_approving_beyond_capacity_is_400_on_gpus_with_the_numbers(api, admin, big_request):
    response = api.as_user(admin).post(url(big_request, "approve"), {})

    assert response.status_code == 400
    assert response.data == {
        "gpus": [
            "Not enough capacity: gpu-east can grant 16 × nvidia.com/gpu (16 at overcommit "
            "1.00), 0 are already granted for that period, so at most 16 more; 20 would exceed "
            "it by 4."
        ]
    }
    assert not QuotaGrant.objects.exists()


def test_existing_grants_count_against_capacity(api, admin, grant, team, cluster, lead):
    thirteen = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=13)

    response = api.as_user(admin).post(url(thirteen, "approve"), {})

    assert response.status_code == 400
    assert "4 are already granted" in response.data["gpus"][0]
    assert "at most 12 more" in response.data["gpus"][0]


def test_overcommit_ratio_of_one_and_a_half_allows_more(api, admin, big_request):
    api.as_user(admin).patch("/api/v1/clusters/gpu-east/", {"overcommit_ratio": "1.5"})

    response = api.post(url(big_request, "approve"), {})

    assert response.status_code == 201
    assert response.data["gpus"] == 20


def test_approving_part_of_a_too_big_request_fits(api, admin, big_request):
    response = api.as_user(admin).post(url(big_request, "approve"), {"gpus": 16})

    assert response.status_code == 201


# --- reject and cancel -------------------------------------------------------------------------


def test_admin_rejects_with_a_note(api, admin, pending_request):
    response = api.as_user(admin).post(
        url(pending_request, "reject"), {"note": "Use the spare cluster."}
    )

    assert response.status_code == 200
    assert response.data["state"] == "rejected"
    assert response.data["decision_note"] == "Use the spare cluster."
    assert response.data["decided_by"] == "ada-admin"
    assert AuditEvent.objects.filter(action="quota_request.rejected").exists()


@pytest.mark.parametrize("body", [{}, {"note": ""}, {"note": "  "}], ids=["none", "empty", "space"])
def test_rejecting_without_a_note_is_400_on_note(api, admin, pending_request, body):
    response = api.as_user(admin).post(url(pending_request, "reject"), body)

    assert response.status_code == 400
    assert response.data == {"note": ["Tell the team why the request is rejected."]}


@pytest.mark.parametrize("user_fixture", ["lead", "member", "viewer"])
def test_team_members_cannot_reject(api, request, pending_request, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).post(url(pending_request, "reject"), {"note": "x"})

    assert response.status_code == 403


def test_lead_of_another_team_gets_404_rejecting_a_request_they_cannot_see(
    api, other_lead, pending_request
):
    response = api.as_user(other_lead).post(url(pending_request, "reject"), {"note": "x"})

    assert response.status_code == 404


def test_lead_cancels_their_pending_request(api, lead, pending_request):
    response = api.as_user(lead).post(url(pending_request, "cancel"))

    assert response.status_code == 200
    assert response.data["state"] == "cancelled"
    assert AuditEvent.objects.filter(action="quota_request.cancelled").exists()


def test_another_lead_of_the_team_may_cancel_it(api, team, pending_request):
    co_lead = factories.UserFactory(username="cora-co-lead")
    factories.MembershipFactory(team=team, user=co_lead, role="lead")

    response = api.as_user(co_lead).post(url(pending_request, "cancel"))

    assert response.status_code == 200


@pytest.mark.parametrize("user_fixture", ["member", "viewer"])
def test_member_or_viewer_cannot_cancel(api, request, pending_request, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).post(url(pending_request, "cancel"))

    assert response.status_code == 403
    assert "requester or a lead" in response.data["detail"]
    assert state_of(pending_request) == "pending"


def test_lead_of_another_team_gets_404_cancelling_a_request_they_cannot_see(
    api, other_lead, pending_request
):
    response = api.as_user(other_lead).post(url(pending_request, "cancel"))

    assert response.status_code == 404
    assert state_of(pending_request) == "pending"


# --- illegal transitions -----------------------------------------------------------------------


@pytest.mark.parametrize("state", ["approved", "rejected", "cancelled"])
@pytest.mark.parametrize(
    ("verb", "body"), [("approve", {}), ("reject", {"note": "No."})], ids=["approve", "reject"]
)
def test_deciding_a_request_that_is_no_longer_pending_is_409(
    api, admin, team, cluster, lead, state, verb, body
):
    decided = factories.QuotaRequestFactory(
        team=team, cluster=cluster, requested_by=lead, state=state
    )

    response = api.as_user(admin).post(url(decided, verb), body)

    assert response.status_code == 409
    assert response.data == {
        "detail": f"Cannot {verb} quota request #{decided.pk}: it is {state}.",
        "state": [state],
    }


@pytest.mark.parametrize("state", ["approved", "rejected", "cancelled"])
def test_cancelling_a_request_that_is_no_longer_pending_is_409(api, lead, team, cluster, state):
    decided = factories.QuotaRequestFactory(
        team=team, cluster=cluster, requested_by=lead, state=state
    )

    response = api.as_user(lead).post(url(decided, "cancel"))

    assert response.status_code == 409
    assert response.data["detail"] == f"Cannot cancel quota request #{decided.pk}: it is {state}."


def test_approving_twice_creates_one_grant(api, admin, pending_request):
    api.as_user(admin).post(url(pending_request, "approve"), {})

    second = api.post(url(pending_request, "approve"), {})

    assert second.status_code == 409
    assert QuotaGrant.objects.count() == 1


# --- the review queue --------------------------------------------------------------------------

QUEUE = "/api/v1/quota-requests/review-queue/"


def test_review_queue_lists_pending_requests_oldest_first(
    api, admin, pending_request, other_pending_request, team, cluster, lead
):
    factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, state="rejected")

    response = api.as_user(admin).get(QUEUE)

    assert response.status_code == 200
    assert [row["id"] for row in response.data["results"]] == [
        pending_request.pk,
        other_pending_request.pk,
    ]


def test_review_queue_shows_the_clusters_capacity_beside_each_request(
    api, admin, grant, pending_request
):
    response = api.as_user(admin).get(QUEUE)

    (item,) = response.data["results"]
    assert item["capacity"] == {
        "capacity": 16,
        "plannable": 16,
        "granted": 4,
        "free": 12,
        "granted_in_period": 4,
        "free_after": 8,
    }


def test_review_queue_counts_only_grants_that_overlap_the_requests_period(
    api, admin, team, cluster, lead, today
):
    # Given 12 of 16 GPUs granted for next month only, and a request for 8 ending before then
    later = factories.QuotaRequestFactory(
        team=team,
        cluster=cluster,
        gpus=12,
        starts_on=today + datetime.timedelta(days=40),
        ends_on=today + datetime.timedelta(days=70),
    )
    api.as_user(admin).post(url(later, "approve"), {})
    soon = factories.QuotaRequestFactory(
        team=team,
        cluster=cluster,
        gpus=8,
        requested_by=lead,
        starts_on=today,
        ends_on=today + datetime.timedelta(days=10),
    )

    # When the admin reads the queue
    (item,) = api.as_user(admin).get(QUEUE).data["results"]

    # Then the figures match the approval's check: nothing overlaps, so 8 are left after it
    assert item["id"] == soon.pk
    assert item["capacity"]["granted_in_period"] == 0
    assert item["capacity"]["free_after"] == 8
    assert api.as_user(admin).post(url(soon, "approve"), {}).status_code == 201


def test_review_queue_shows_a_negative_free_after_for_a_request_that_does_not_fit(
    api, admin, team, cluster, lead
):
    factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=20)

    response = api.as_user(admin).get(QUEUE)

    assert response.data["results"][0]["capacity"]["free_after"] == -4


@pytest.mark.parametrize("user_fixture", ["lead", "member", "outsider"])
def test_review_queue_is_for_admins_only(api, request, pending_request, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).get(QUEUE)

    assert response.status_code == 403
    assert response.data["detail"] == "Only portal admins can see the review queue."


def test_approving_a_request_whose_period_is_over_is_400_on_ends_on(api, admin, team, cluster):
    # Given a request that waited in the queue past its last day
    stale = factories.QuotaRequestFactory(team=team, cluster=cluster)
    yesterday = datetime.date.today() - datetime.timedelta(days=1)
    QuotaRequest.objects.filter(pk=stale.pk).update(
        starts_on=yesterday - datetime.timedelta(days=7), ends_on=yesterday
    )

    # When an admin approves it
    response = api.as_user(admin).post(url(stale, "approve"), {})

    # Then nothing is granted and the admin is told the period is over
    assert response.status_code == 400
    assert "nothing to grant" in response.data["ends_on"][0]
    assert not QuotaGrant.objects.filter(request=stale).exists()
    assert state_of(stale) == QuotaRequest.State.PENDING
