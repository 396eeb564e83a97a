"""The audit trail: who did what and when, with a readable before/after, per team."""

import re

import pytest

from tenants import quota
from tests.integration.pages.helpers import get_ok

pytestmark = pytest.mark.django_db


def test_audit_shows_who_what_when_and_the_change(client_as, admin, lead, team, make_request):
    quota_request = make_request(lead, team)
    quota.quota_request_reject(reviewer=admin, quota_request=quota_request, note="Not now.")

    response = get_ok(client_as(lead), "/audit/")

    html = response.content.decode()
    assert "quota_request.rejected" in html
    assert "by ada-admin" in html
    assert "“Not now.”" in html
    rejected = response.context["events"][0]
    assert rejected.action == "quota_request.rejected"
    changed = {change.field: (change.before, change.after) for change in rejected.changes}
    assert changed == {"state": ("pending", "rejected"), "decision note": (None, "Not now.")}
    assert re.search(
        r"<th scope=\"row\">state</th>\s*<td class=\"before\">pending</td>\s*"
        r"<td class=\"after\">rejected</td>",
        html,
    )


def test_created_events_show_their_fields_with_names_not_ids(client_as, lead, team, make_request):
    make_request(lead, team, gpus=4)

    event = get_ok(client_as(lead), "/audit/").context["events"][0]

    fields = {change.field: change.after for change in event.changes}
    assert fields["team"] == "vision"
    assert fields["cluster"] == "gpu-east"
    assert fields["GPUs"] == "4"
    assert all(change.before is None for change in event.changes)


def test_audit_shows_only_the_users_teams(
    client_as, lead, other_lead, team, other_team, make_request
):
    make_request(lead, team)
    make_request(other_lead, other_team)

    events = get_ok(client_as(lead), "/audit/").context["events"]

    assert {event.team.slug for event in events} == {"vision"}


def test_audit_filters_by_team(client_as, admin, lead, other_lead, team, other_team, make_request):
    make_request(lead, team)
    make_request(other_lead, other_team)
    client = client_as(admin)

    assert {e.team.slug for e in get_ok(client, "/audit/").context["events"]} == {
        "vision", "speech",
    }  # fmt: skip
    filtered = get_ok(client, "/audit/?team=speech")
    assert {e.team.slug for e in filtered.context["events"]} == {"speech"}


def test_filtering_by_a_team_the_user_cannot_see_shows_nothing_of_it(
    client_as, lead, other_lead, team, other_team, make_request
):
    make_request(other_lead, other_team)

    response = get_ok(client_as(lead), "/audit/?team=speech")

    assert not [e for e in response.context["events"] if e.team.slug == "speech"]
    assert response.context["filter_form"].errors


def test_audit_is_paginated_and_keeps_the_filter(client_as, lead, team, make_request):
    for _ in range(30):
        make_request(lead, team, gpus=1)
    client = client_as(lead)

    first = get_ok(client, "/audit/?team=vision")
    second = get_ok(client, "/audit/?team=vision&page=2")

    assert len(first.context["events"]) == 25
    assert len(second.context["events"]) == 5
    assert 'href="?team=vision&amp;page=2"' in first.content.decode()
    assert "Page 2 of 2" in second.content.decode()


def test_audit_filters_by_action_as_the_api_does(client_as, admin, lead, team, make_request):
    quota_request = make_request(lead, team)
    quota.quota_request_reject(reviewer=admin, quota_request=quota_request, note="No.")

    events = get_ok(client_as(lead), "/audit/?action=quota_request.rejected").context["events"]

    assert [event.action for event in events] == ["quota_request.rejected"]


def test_a_non_integer_target_id_is_an_error_on_the_form(client_as, lead, team, make_request):
    make_request(lead, team)

    response = get_ok(client_as(lead), "/audit/?target_id=ten")

    assert list(response.context["filter_form"].errors) == ["target_id"]
    assert response.context["events"] == []
    assert "No events match." in response.content.decode()


def test_audit_page_queries_do_not_grow_with_events(
    client_as, admin, lead, team, make_request, django_assert_max_num_queries
):
    client = client_as(admin)
    make_request(lead, team, gpus=1)
    get_ok(client, "/audit/")
    with django_assert_max_num_queries(20) as few:
        get_ok(client, "/audit/")
    for _ in range(10):
        quota_request = make_request(lead, team, gpus=1)
        quota.quota_request_approve(reviewer=admin, quota_request=quota_request)

    with django_assert_max_num_queries(len(few.captured_queries)):
        get_ok(client, "/audit/")
