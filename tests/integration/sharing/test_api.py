"""Sharing layouts over REST: leads ask, admins decide, scoped as quota requests (another team's
layout is a 404); bad input is a 400 naming the field and writes nothing."""

import datetime

import pytest

from sharing.models import LayoutRequest
from tests import factories
from tests.integration.sharing.conftest import A100

pytestmark = pytest.mark.django_db
URL = "/api/v1/sharing-layouts/"


def body(grant, today, **overrides):
    return {
        "team": grant.team.slug,
        "source_grant": grant.pk,
        "gpus": 2,
        "kind": "mig",
        "mig_profile": "1g.10gb",
        "ends_on": (today + datetime.timedelta(days=7)).isoformat(),
        "justification": "Notebooks.",
        **overrides,
    }


def test_a_lead_asks_and_sees_what_it_becomes(api, lead, a100_grant, today):
    response = api.as_user(lead).post(URL, body(a100_grant, today), format="json")

    assert response.status_code == 201, response.json()
    answer = response.json()
    assert (answer["state"], answer["slices"], answer["slice_resource"]) == (
        "pending",
        14,
        "nvidia.com/mig-1g.10gb",
    )
    assert answer["gpu_model"] == A100
    assert LayoutRequest.objects.get().requested_by == lead


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"gpus": 9}, "gpus"),
        ({"gpus": 0}, "gpus"),
        ({"gpus": "two"}, "gpus"),
        ({"mig_profile": "9g.99gb"}, "mig_profile"),
        ({"kind": "shared", "mig_profile": "", "replicas": 5}, "replicas"),
        ({"kind": "mps"}, "kind"),
        ({"ends_on": "2000-01-01"}, "ends_on"),
        ({"ends_on": "2999-01-01"}, "ends_on"),
        ({"ends_on": "soon"}, "ends_on"),
        ({"source_grant": 999999}, "source_grant"),
        ({"team": "nope"}, "team"),
        ({"justification": ""}, "justification"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, lead, a100_grant, today, overrides, field):
    response = api.as_user(lead).post(URL, body(a100_grant, today, **overrides), format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not LayoutRequest.objects.exists()


def test_another_team_s_grant_is_a_400_naming_it(api, lead, team, other_team, admin, today):
    others = factories.QuotaGrantFactory(request__team=other_team, request__gpu_model=A100)
    # As an admin (who sees every grant), for the lead's team: the grant is not its own.
    response = api.as_user(admin).post(
        URL, body(others, today, team=team.slug, ends_on=str(today)), format="json"
    )
    assert response.status_code == 400
    assert "not one of vision's grants" in response.json()["source_grant"][0]
    # The lead does not even see it.
    response = api.as_user(lead).post(URL, body(others, today, team=team.slug), format="json")
    assert response.json()["source_grant"] == [f"No grant #{others.pk}."]


def test_a_member_may_not_ask(api, member, a100_grant, today):
    response = api.as_user(member).post(URL, body(a100_grant, today), format="json")

    assert response.status_code == 403


def test_other_teams_see_nothing_of_the_layout(api, other_lead, outsider, pending_layout):
    for user in (other_lead, outsider):
        assert api.as_user(user).get(f"{URL}{pending_layout.pk}/").status_code == 404
        assert api.as_user(user).get(URL).json()["results"] == []
        cancel = api.as_user(user).post(f"{URL}{pending_layout.pk}/cancel/")
        assert cancel.status_code == 404


def test_the_team_s_members_and_its_department_admins_see_it(
    api, member, viewer, dept_admin, pending_layout
):
    for user in (member, viewer, dept_admin):
        ids = [item["id"] for item in api.as_user(user).get(URL).json()["results"]]
        assert ids == [pending_layout.pk]


def test_a_lead_may_not_approve_and_an_admin_approves(api, lead, admin, pending_layout):
    refused = api.as_user(lead).post(f"{URL}{pending_layout.pk}/approve/", {}, format="json")
    assert refused.status_code == 403

    response = api.as_user(admin).post(
        f"{URL}{pending_layout.pk}/approve/", {"note": "Go."}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["state"] == "approved"
    assert response.json()["decision_note"] == "Go."


def test_rejecting_needs_a_note_and_a_decided_layout_is_a_409(api, admin, pending_layout):
    url = f"{URL}{pending_layout.pk}/reject/"
    assert "note" in api.as_user(admin).post(url, {"note": ""}, format="json").json()

    assert api.as_user(admin).post(url, {"note": "No."}, format="json").status_code == 200
    again = api.as_user(admin).post(url, {"note": "No."}, format="json")
    assert again.status_code == 409
    assert again.json()["state"] == ["rejected"]


def test_the_list_filters_by_state(api, lead, pending_layout):
    assert api.as_user(lead).get(URL, {"state": "applied"}).json()["results"] == []
    assert api.as_user(lead).get(URL, {"state": "bogus"}).status_code == 400
    assert api.as_user(lead).get(URL, {"state": "pending"}).json()["count"] == 1
