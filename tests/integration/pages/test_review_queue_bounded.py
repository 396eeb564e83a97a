"""The review queue stays one page whatever the number of pending requests: pages of
``REVIEW_PAGE_SIZE``, filters by cluster, team, GPU kind, GPU model and age, and approving or
rejecting the requests ticked on a page at once, each through the same service (and checks) as
one decision."""

import datetime

import pytest
from django.utils import timezone

from tenants.filtersets import MAX_TEAM_CHOICES
from tenants.models import QuotaGrant, QuotaRequest, Team
from tests import factories
from tests.integration.pages.helpers import get_ok, messages_text

pytestmark = pytest.mark.django_db

REVIEW_PAGE_SIZE = 25


def listed(response) -> list[int]:
    return [row.request.pk for row in response.context["rows"]]


def test_queue_shows_a_page_at_a_time_oldest_first(client_as, admin, lead, team, cluster):
    requests = factories.QuotaRequestFactory.create_batch(
        REVIEW_PAGE_SIZE + 2, team=team, cluster=cluster, requested_by=lead
    )
    client = client_as(admin)

    first = get_ok(client, "/review/")
    second = get_ok(client, "/review/?page=2")

    assert listed(first) == [r.pk for r in requests[:REVIEW_PAGE_SIZE]]
    assert listed(second) == [r.pk for r in requests[REVIEW_PAGE_SIZE:]]
    assert f"{REVIEW_PAGE_SIZE + 2} pending requests" in first.content.decode()
    assert 'href="?page=2"' in first.content.decode()


def test_queue_page_past_the_end_is_not_found(client_as, admin):
    assert client_as(admin).get("/review/?page=2").status_code == 404


def test_queue_filters_by_gpu_model(client_as, admin, lead, team, cluster):
    h100 = factories.QuotaRequestFactory(
        team=team, cluster=cluster, requested_by=lead, gpu_model="H100"
    )
    factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead)

    response = get_ok(client_as(admin), "/review/?gpu_model=H100")

    assert listed(response) == [h100.pk]


def test_queue_filters_by_age(client_as, admin, lead, team, cluster):
    old, _new = factories.QuotaRequestFactory.create_batch(
        2, team=team, cluster=cluster, requested_by=lead
    )
    QuotaRequest.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - datetime.timedelta(days=10)
    )

    response = get_ok(client_as(admin), "/review/?min_age_days=7")

    assert listed(response) == [old.pk]


def test_queue_age_out_of_range_is_an_error_on_the_form(client_as, admin):
    response = get_ok(client_as(admin), "/review/?min_age_days=-1")

    assert list(response.context["filter_form"].errors) == ["min_age_days"]
    assert response.context["rows"] == []


def test_with_many_teams_the_team_filter_takes_a_slug(client_as, admin, lead, team, cluster):
    Team.objects.bulk_create(
        [Team(slug=f"many-{i}", name=f"Many {i}") for i in range(MAX_TEAM_CHOICES + 1)]
    )
    mine = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead)

    response = get_ok(client_as(admin), f"/review/?team={team.slug}")

    assert listed(response) == [mine.pk]
    assert '<input type="text" name="team"' in response.content.decode()


def decide(client, requests, decision, note="", query=""):
    return client.post(
        f"/review/decide/{query}",
        {"requests": [r.pk for r in requests], "decision": decision, "note": note},
        follow=True,
    )


def test_bulk_approval_grants_what_fits_and_says_why_the_rest_was_refused(
    client_as, admin, lead, team, cluster
):
    # 16 GPUs on the cluster: 8 and 6 fit, 4 more do not.
    eight, six, four = (
        factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=n)
        for n in (8, 6, 4)
    )

    response = decide(client_as(admin), [eight, six, four], "approve", note="Approved in bulk.")

    assert response.redirect_chain == [("/review/", 302)]
    granted = QuotaGrant.objects.order_by("gpus").values_list("request_id", "gpus")
    assert list(granted) == [(six.pk, 6), (eight.pk, 8)]
    four.refresh_from_db()
    assert four.state == QuotaRequest.State.PENDING
    shown = messages_text(response)
    assert shown[0] == f"Approved 2 requests: #{eight.pk}, #{six.pk}."
    assert shown[1].startswith(f"#{four.pk} not approved: ")
    assert "capacity" in shown[1].lower() or "GPUs" in shown[1]


def test_bulk_rejection_rejects_each_with_the_note(client_as, admin, lead, team, cluster):
    requests = factories.QuotaRequestFactory.create_batch(
        2, team=team, cluster=cluster, requested_by=lead
    )

    response = decide(client_as(admin), requests, "reject", note="No budget this quarter.")

    assert messages_text(response) == [
        f"Rejected 2 requests: #{requests[0].pk}, #{requests[1].pk}."
    ]
    for quota_request in requests:
        quota_request.refresh_from_db()
        assert quota_request.state == QuotaRequest.State.REJECTED
        assert quota_request.decision_note == "No budget this quarter."


def test_bulk_rejection_without_a_note_rejects_nothing(client_as, admin, lead, team, cluster):
    requests = factories.QuotaRequestFactory.create_batch(
        2, team=team, cluster=cluster, requested_by=lead
    )

    response = decide(client_as(admin), requests, "reject")

    assert all(
        message.endswith("Tell the team why the request is rejected.")
        for message in messages_text(response)
    )
    assert len(messages_text(response)) == 2
    assert QuotaRequest.objects.filter(state=QuotaRequest.State.PENDING).count() == 2


def test_bulk_decision_refuses_the_admins_own_request_only(client_as, admin, lead, team, cluster):
    own = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=admin, gpus=1)
    theirs = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=1)

    response = decide(client_as(admin), [own, theirs], "approve")

    assert messages_text(response) == [
        f"Approved 1 request: #{theirs.pk}.",
        f"#{own.pk} not approved: You cannot decide on a quota request you made yourself.",
    ]


def test_bulk_decision_of_a_decided_request_says_so(client_as, admin, lead, team, cluster):
    decided = factories.QuotaRequestFactory(
        team=team, cluster=cluster, requested_by=lead, state=QuotaRequest.State.CANCELLED
    )

    response = decide(client_as(admin), [decided], "approve")

    assert len(messages_text(response)) == 1
    assert messages_text(response)[0].startswith(f"#{decided.pk} not approved: ")
    assert not QuotaGrant.objects.exists()


def test_bulk_decision_keeps_the_filters(client_as, admin, lead, team, cluster):
    one = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=lead, gpus=1)

    response = decide(client_as(admin), [one], "approve", query="?cluster=gpu-east&page=1")

    assert response.redirect_chain == [("/review/?cluster=gpu-east", 302)]


def test_bulk_decision_with_nothing_ticked_decides_nothing(client_as, admin):
    response = decide(client_as(admin), [], "approve")

    assert response.status_code == 200
    assert response.context["bulk_form"].errors == {"requests": ["Tick the requests to decide."]}


def test_bulk_decision_is_for_admins_only(client_as, lead, other_lead, team, cluster):
    request = factories.QuotaRequestFactory(team=team, cluster=cluster, requested_by=other_lead)

    response = client_as(lead).post(
        "/review/decide/", {"requests": [request.pk], "decision": "approve"}
    )

    assert response.status_code == 403
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.PENDING
