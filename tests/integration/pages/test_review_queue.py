"""The admins' review queue: capacity beside each request, approve and reject forms."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants import quota, services
from tenants.models import QuotaGrant, QuotaRequest
from tests import factories
from tests.integration.pages.helpers import field_error_html, get_ok, messages_text

pytestmark = pytest.mark.django_db


def test_queue_lists_pending_requests_oldest_first(
    client_as, admin, lead, other_lead, team, other_team, make_request
):
    first = make_request(lead, team)
    second = make_request(other_lead, other_team)
    cancelled = make_request(lead, team)
    quota.quota_request_cancel(actor=lead, quota_request=cancelled)

    response = get_ok(client_as(admin), "/review/")

    assert [row.request.pk for row in response.context["rows"]] == [first.pk, second.pk]
    html = response.content.decode()
    assert html.index(f'id="request-{first.pk}"') < html.index(f'id="request-{second.pk}"')
    assert f'id="request-{cancelled.pk}"' not in html


def test_queue_filters_by_team_and_cluster_as_the_api_does(
    client_as, admin, lead, other_lead, team, other_team, make_request, second_cluster
):
    make_request(lead, team)
    speech_east = make_request(other_lead, other_team)
    speech_west = make_request(
        other_lead, other_team, cluster=second_cluster, gpu_resource="nvidia.com/mig-1g.10gb"
    )
    client = client_as(admin)

    by_team = get_ok(client, "/review/?team=speech").context["rows"]
    by_both = get_ok(client, "/review/?team=speech&cluster=gpu-west").context["rows"]

    assert [row.request.pk for row in by_team] == [speech_east.pk, speech_west.pk]
    assert [row.request.pk for row in by_both] == [speech_west.pk]


def test_queue_filter_naming_no_team_is_an_error_on_the_form(
    client_as, admin, lead, team, make_request
):
    make_request(lead, team)

    response = get_ok(client_as(admin), "/review/?team=nobody")

    assert list(response.context["filter_form"].errors) == ["team"]
    assert response.context["rows"] == []
    assert "No pending request matches." in response.content.decode()


def test_queue_shows_capacity_granted_and_what_approving_leaves(
    client_as, admin, lead, team, make_request, make_grant
):
    make_grant(lead, team, gpus=6)
    make_request(lead, team, gpus=4)

    html = get_ok(client_as(admin), "/review/").content.decode()

    assert 'data-testid="capacity-plannable">16<' in html
    assert 'data-testid="capacity-granted">6<' in html
    assert 'data-testid="capacity-free">10<' in html
    assert 'data-testid="capacity-after">6<' in html


def test_queue_warns_when_approving_everything_would_exceed_capacity(
    client_as, admin, lead, team, make_request, make_grant
):
    make_grant(lead, team, gpus=14)
    make_request(lead, team, gpus=4)

    html = get_ok(client_as(admin), "/review/").content.decode()

    assert 'data-testid="capacity-after">-2<' in html
    assert "would exceed capacity" in html


def test_queue_counts_overcommit(client_as, admin, lead, team, cluster, make_request):
    services.cluster_set_overcommit(actor=admin, cluster=cluster, ratio=1.5)
    make_request(lead, team, gpus=4)

    html = get_ok(client_as(admin), "/review/").content.decode()

    assert 'data-testid="capacity-plannable">24<' in html
    assert "16 GPUs at overcommit 1.50" in html


def test_queue_runs_the_same_number_of_queries_for_many_requests(
    client_as, admin, lead, team, make_request
):
    client = client_as(admin)
    make_request(lead, team, gpus=1)
    get_ok(client, "/review/")
    with CaptureQueriesContext(connection) as one:
        get_ok(client, "/review/")
    for _ in range(6):
        other_cluster = factories.ClusterFactory()
        factories.GpuCapacityFactory(cluster=other_cluster)
        requester = factories.UserFactory()
        services.membership_set(actor=admin, team=team, user=requester, role="lead")
        make_request(requester, team, gpus=1, cluster=other_cluster)

    with CaptureQueriesContext(connection) as seven:
        response = get_ok(client, "/review/")

    assert len(response.context["rows"]) == 7
    assert len(seven.captured_queries) == len(one.captured_queries)


def test_admin_approves_for_fewer_gpus_and_an_earlier_end_with_a_note(
    client_as, admin, lead, team, make_request
):
    quota_request = make_request(lead, team, gpus=8)
    until = quota_request.ends_on - datetime.timedelta(days=10)
    prefix = f"approve-{quota_request.pk}"

    response = client_as(admin).post(
        f"/requests/{quota_request.pk}/approve/",
        {
            f"{prefix}-gpus": "5",
            f"{prefix}-ends_on": until.isoformat(),
            f"{prefix}-note": "Five for now.",
        },
        follow=True,
    )

    assert response.redirect_chain == [("/review/", 302)]
    assert messages_text(response) == [
        f"Approved request #{quota_request.pk}: Vision has 5 × nvidia.com/gpu on GPU East."
    ]
    grant = QuotaGrant.objects.get(request=quota_request)
    assert (grant.gpus, grant.ends_on) == (5, until)
    quota_request.refresh_from_db()
    assert (quota_request.state, quota_request.decision_note) == ("approved", "Five for now.")


def test_admin_approves_as_asked_with_empty_fields(client_as, admin, lead, team, make_request):
    quota_request = make_request(lead, team, gpus=3)

    response = client_as(admin).post(f"/requests/{quota_request.pk}/approve/", {})

    assert response.status_code == 302
    assert QuotaGrant.objects.get(request=quota_request).gpus == 3


def test_approving_beyond_capacity_shows_the_error_on_the_approve_form(
    client_as, admin, lead, team, make_request, make_grant
):
    make_grant(lead, team, gpus=14)
    quota_request = make_request(lead, team, gpus=4)

    response = client_as(admin).post(f"/requests/{quota_request.pk}/approve/", {})

    assert response.status_code == 200
    errors = field_error_html(response, f"id_approve-{quota_request.pk}-gpus")
    assert "Not enough capacity" in errors
    assert "at most 2 more" in errors
    quota_request.refresh_from_db()
    assert quota_request.state == "pending"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpus", "9", "Can approve at most the 4 GPUs requested."),
        ("gpus", "0", "Must be a whole number of GPUs, at least 1."),
        ("ends_on", "2000-01-01", "Must not be before the start date"),
        ("ends_on", "2999-01-01", "Can only shorten the requested period"),
    ],
)
def test_bad_approval_input_is_shown_beside_its_field(
    client_as, admin, lead, team, make_request, field, value, message
):
    quota_request = make_request(lead, team, gpus=4)
    prefix = f"approve-{quota_request.pk}"

    response = client_as(admin).post(
        f"/requests/{quota_request.pk}/approve/", {f"{prefix}-{field}": value}
    )

    assert response.status_code == 200
    assert message in field_error_html(response, f"id_{prefix}-{field}")
    assert not QuotaGrant.objects.exists()


def test_only_the_failed_form_is_bound(client_as, admin, lead, team, make_request):
    failing = make_request(lead, team, gpus=4)
    other = make_request(lead, team, gpus=4)

    response = client_as(admin).post(
        f"/requests/{failing.pk}/approve/", {f"approve-{failing.pk}-gpus": "9"}
    )

    html = response.content.decode()
    assert field_error_html(response, f"id_approve-{failing.pk}-gpus")
    assert field_error_html(response, f"id_approve-{other.pk}-gpus") == ""
    assert f'id="request-{other.pk}"' in html


def test_admin_rejects_with_a_note(client_as, admin, lead, team, make_request):
    quota_request = make_request(lead, team)

    response = client_as(admin).post(
        f"/requests/{quota_request.pk}/reject/",
        {f"reject-{quota_request.pk}-note": "Use the shared pool."},
        follow=True,
    )

    assert messages_text(response) == [f"Rejected request #{quota_request.pk}."]
    quota_request.refresh_from_db()
    assert (quota_request.state, quota_request.decision_note) == (
        "rejected",
        "Use the shared pool.",
    )
    assert f'id="request-{quota_request.pk}"' not in response.content.decode()


def test_rejecting_without_a_note_shows_the_error_beside_the_note(
    client_as, admin, lead, team, make_request
):
    quota_request = make_request(lead, team)

    response = client_as(admin).post(
        f"/requests/{quota_request.pk}/reject/", {f"reject-{quota_request.pk}-note": "  "}
    )

    assert response.status_code == 200
    assert "Tell the team why the request is rejected." in field_error_html(
        response, f"id_reject-{quota_request.pk}-note"
    )
    quota_request.refresh_from_db()
    assert quota_request.state == "pending"


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_deciding_an_already_decided_request_shows_a_message(
    client_as, admin, lead, team, make_request, action
):
    quota_request = make_request(lead, team)
    quota.quota_request_cancel(actor=lead, quota_request=quota_request)

    response = client_as(admin).post(
        f"/requests/{quota_request.pk}/{action}/",
        {f"reject-{quota_request.pk}-note": "late"},
        follow=True,
    )

    assert response.status_code == 200
    assert response.redirect_chain == [("/review/", 302)]
    assert messages_text(response) == [
        f"Cannot {action} quota request #{quota_request.pk}: it is cancelled."
    ]
    quota_request.refresh_from_db()
    assert quota_request.state == QuotaRequest.State.CANCELLED


def test_decision_forms_carry_csrf_tokens(client_as, admin, lead, team, make_request):
    make_request(lead, team)

    html = get_ok(client_as(admin), "/review/").content.decode()

    # approve, reject, the ticked ones at once, sign out
    assert html.count('name="csrfmiddlewaretoken"') == 4
