"""The team page: grants, pending and past requests; cancelling a pending request."""

import datetime
import re

import pytest
from django.utils import timezone

from tenants import quota
from tenants.models import QuotaRequest
from tests.integration.pages.helpers import get_ok, messages_text

pytestmark = pytest.mark.django_db


def _section(html: str, testid: str) -> str:
    match = re.search(rf'data-testid="{testid}">(.*?)</table>', html, re.S)
    return match.group(1) if match else ""


def test_team_page_shows_grants_pending_and_past_requests(
    client_as, admin, lead, member, team, make_request, make_grant
):
    grant = make_grant(lead, team, gpus=3, memory_gib=64)
    pending = make_request(lead, team, gpus=2, justification="Evaluation runs.")
    rejected = make_request(lead, team, gpus=8)
    quota.quota_request_reject(reviewer=admin, quota_request=rejected, note="Too many for now.")

    html = get_ok(client_as(member), "/teams/vision/").content.decode()

    grants = _section(html, "active-grants")
    assert f'href="/grants/{grant.pk}/"' in grants
    assert "nvidia.com/gpu" in grants
    assert "64 GiB" in grants
    assert "Active" in grants
    pending_html = _section(html, "pending-requests")
    assert f'id="request-{pending.pk}"' in pending_html
    assert "Evaluation runs." in pending_html
    past = _section(html, "past-requests")
    assert f'id="request-{rejected.pk}"' in past
    assert "Rejected" in past
    assert "Too many for now." in past
    assert "ada-admin" in past
    assert f'href="/grants/{grant.pk}/"' in past


def test_a_grant_booked_ahead_says_when_it_starts_not_active(client_as, lead, team, make_grant):
    tomorrow = timezone.localdate() + datetime.timedelta(days=1)
    grant = make_grant(lead, team, starts_on=tomorrow)

    grants = _section(get_ok(client_as(lead), "/teams/vision/").content.decode(), "active-grants")
    detail = get_ok(client_as(lead), f"/grants/{grant.pk}/").content.decode()

    assert f"Starts {tomorrow:%Y-%m-%d}" in grants
    assert "Active" not in grants
    assert f"Starts {tomorrow:%Y-%m-%d}" in detail


def test_open_ended_grant_says_so(client_as, lead, team, make_grant):
    make_grant(lead, team, ends_on=None)

    html = get_ok(client_as(lead), "/teams/vision/").content.decode()

    assert "open-ended" in _section(html, "active-grants")


def test_lead_sees_the_request_quota_link(client_as, lead, team):
    html = get_ok(client_as(lead), "/teams/vision/").content.decode()

    assert 'href="/teams/vision/requests/new/"' in html


def test_cancel_buttons_show_for_requester_and_leads_only(
    client_as, lead, member, viewer, team, make_request
):
    quota_request = make_request(lead, team)
    action = f'action="/requests/{quota_request.pk}/cancel/"'

    assert action in get_ok(client_as(lead), "/teams/vision/").content.decode()
    assert action not in get_ok(client_as(member), "/teams/vision/").content.decode()
    assert action not in get_ok(client_as(viewer), "/teams/vision/").content.decode()


def test_lead_cancels_a_pending_request(client_as, lead, team, make_request):
    quota_request = make_request(lead, team)

    response = client_as(lead).post(f"/requests/{quota_request.pk}/cancel/", follow=True)

    assert response.redirect_chain == [("/teams/vision/", 302)]
    assert messages_text(response) == [f"Cancelled quota request #{quota_request.pk}."]
    quota_request.refresh_from_db()
    assert quota_request.state == QuotaRequest.State.CANCELLED
    assert "Cancelled" in _section(response.content.decode(), "past-requests")


def test_cancel_is_post_only(client_as, lead, team, make_request):
    quota_request = make_request(lead, team)

    assert client_as(lead).get(f"/requests/{quota_request.pk}/cancel/").status_code == 405


def test_member_cannot_cancel_someone_elses_request(client_as, lead, member, team, make_request):
    quota_request = make_request(lead, team)

    response = client_as(member).post(f"/requests/{quota_request.pk}/cancel/")

    assert response.status_code == 403
    assert "Only the requester or a lead" in response.content.decode()
    quota_request.refresh_from_db()
    assert quota_request.state == QuotaRequest.State.PENDING


def test_cancelling_an_approved_request_shows_a_message_not_an_error(
    client_as, lead, team, make_grant
):
    grant = make_grant(lead, team)

    response = client_as(lead).post(f"/requests/{grant.request_id}/cancel/", follow=True)

    assert response.status_code == 200
    assert messages_text(response) == [
        f"Cannot cancel quota request #{grant.request_id}: it is approved."
    ]
    assert 'class="message message-error"' in response.content.decode()


def test_team_page_queries_do_not_grow_with_requests(
    client_as, lead, team, make_request, make_grant, django_assert_max_num_queries
):
    client = client_as(lead)
    make_grant(lead, team, gpus=1)
    make_request(lead, team, gpus=1)
    get_ok(client, "/teams/vision/")
    # One of them counts the GPUs and jobs of every unfinished job (the table shows the newest).
    with django_assert_max_num_queries(14) as few:
        get_ok(client, "/teams/vision/")
    for _ in range(5):
        make_grant(lead, team, gpus=1)
        make_request(lead, team, gpus=1)

    with django_assert_max_num_queries(len(few.captured_queries)):
        get_ok(client, "/teams/vision/")
