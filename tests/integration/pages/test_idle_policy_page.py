"""Saving a team's idle policy through its monitoring page: a lead's (or an admin's) form post is
saved, audited once, and shown back in the form; bad input is shown as an error and saves
nothing; members of the team may not set it and other teams do not see it."""

import pytest

from monitoring.models import IdlePolicy
from tenants.models import AuditEvent
from tests import factories
from tests.integration.pages.helpers import messages_text

pytestmark = pytest.mark.django_db

PAGE = "/monitoring/teams/vision/"
POLICY = f"{PAGE}idle-policy/"


def policy_of(team) -> tuple | None:
    return (
        IdlePolicy.objects.filter(team=team)
        .values_list("notify_leads", "stop_after_minutes", "warn_minutes_before_stop")
        .first()
    )


def policy_events(team) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(team=team, action=AuditEvent.Action.IDLE_POLICY_SET))


def form_values(response) -> dict:
    form = response.context["policy_form"]
    return {name: form[name].value() for name in form.fields}


@pytest.mark.parametrize("who", ["lead", "admin"])
def test_a_lead_or_an_admin_saves_the_policy_and_sees_it_back(request, client_as, team, who):
    user = request.getfixturevalue(who)
    page = client_as(user)

    response = page.post(
        POLICY,
        {"notify_leads": "on", "stop_after_minutes": "120", "warn_minutes_before_stop": "30"},
        follow=True,
    )

    assert response.redirect_chain == [(PAGE, 302)]
    assert messages_text(response) == ["Saved Vision's idle policy."]
    assert policy_of(team) == (True, 120, 30)
    assert IdlePolicy.objects.get(team=team).updated_by == user
    (event,) = policy_events(team)
    assert event.actor == user
    assert event.before == {
        "notify_leads": True,
        "stop_after_minutes": None,
        "warn_minutes_before_stop": 15,
    }
    assert event.after == {
        "notify_leads": True,
        "stop_after_minutes": 120,
        "warn_minutes_before_stop": 30,
    }
    assert form_values(response) == {
        "notify_leads": True,
        "stop_after_minutes": 120,
        "warn_minutes_before_stop": 30,
    }


def test_an_unticked_box_and_an_empty_limit_mean_silent_and_never_stop(client_as, lead, team):
    factories.IdlePolicyFactory(team=team, stop_after_minutes=60, warn_minutes_before_stop=10)

    client_as(lead).post(POLICY, {"stop_after_minutes": "", "warn_minutes_before_stop": "10"})

    assert policy_of(team) == (False, None, 10)


def test_saving_the_same_policy_again_audits_nothing_new(client_as, lead, team):
    page = client_as(lead)
    body = {"notify_leads": "on", "stop_after_minutes": "60", "warn_minutes_before_stop": "10"}
    page.post(POLICY, body)

    page.post(POLICY, body)

    assert len(policy_events(team)) == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"stop_after_minutes": "5", "warn_minutes_before_stop": "1"},
            "Ensure this value is greater than or equal to 10.",
        ),
        (
            {"stop_after_minutes": "forever", "warn_minutes_before_stop": "15"},
            "Enter a whole number.",
        ),
        ({"stop_after_minutes": "60", "warn_minutes_before_stop": ""}, "This field is required."),
        (
            {"stop_after_minutes": "60", "warn_minutes_before_stop": "0"},
            "Ensure this value is greater than or equal to 1.",
        ),
        (
            {"stop_after_minutes": "30", "warn_minutes_before_stop": "30"},
            "Must be longer than the warning time before it.",
        ),
        (
            {"stop_after_minutes": str(10**12), "warn_minutes_before_stop": "15"},
            "Ensure this value is less than or equal to 43200.",
        ),
    ],
    ids=["too-short", "not-a-number", "no-warning", "zero-warning", "warning-as-long", "huge"],
)
def test_bad_input_is_shown_and_saves_nothing(client_as, lead, team, body, message):
    factories.IdlePolicyFactory(team=team, stop_after_minutes=120, warn_minutes_before_stop=15)
    before = policy_of(team)

    response = client_as(lead).post(POLICY, body, follow=True)

    assert response.status_code == 200
    assert response.redirect_chain == [(PAGE, 302)]
    assert message in messages_text(response)
    assert 'class="message message-error"' in response.content.decode()
    assert policy_of(team) == before
    assert policy_events(team) == []


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_of_the_team_cannot_set_it(request, client_as, team, who):
    page = client_as(request.getfixturevalue(who))

    response = page.post(POLICY, {"stop_after_minutes": "60", "warn_minutes_before_stop": "10"})

    assert response.status_code == 403
    assert policy_of(team) is None
    assert 'data-testid="idle-policy-form"' not in page.get(PAGE).content.decode()


def test_another_teams_lead_gets_a_404_and_changes_nothing(client_as, other_lead, team):
    response = client_as(other_lead).post(
        POLICY, {"stop_after_minutes": "60", "warn_minutes_before_stop": "10"}
    )

    assert response.status_code == 404
    assert policy_of(team) is None


def test_setting_the_policy_is_a_post(client_as, lead, team):
    assert client_as(lead).get(POLICY).status_code == 405
