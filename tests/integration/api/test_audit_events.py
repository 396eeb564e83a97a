"""The audit trail: members read their teams' events, admins read everything."""

import pytest

from tests import factories

pytestmark = pytest.mark.django_db

URL = "/api/v1/audit-events/"


def event(
    *, team, action="quota_request.created", target_type="QuotaRequest", target_id=1, actor=None
):
    return factories.AuditEventFactory(
        team=team,
        action=action,
        target_type=target_type,
        target_id=target_id,
        actor=actor,
        before=None,
        after={"state": "pending"},
    )


@pytest.fixture
def events(team, other_team, lead, other_lead, admin):
    return {
        "a-created": event(team=team, actor=lead, target_id=10),
        "a-approved": event(team=team, actor=admin, action="quota_request.approved", target_id=10),
        "a-grant": event(
            team=team,
            actor=admin,
            action="quota_grant.activated",
            target_type="QuotaGrant",
            target_id=7,
        ),
        "b-created": event(team=other_team, actor=other_lead, target_id=11),
        "cluster": event(
            team=None,
            actor=admin,
            action="cluster.overcommit_changed",
            target_type="Cluster",
            target_id=1,
        ),
    }


def names(response, events):
    by_id = {e.pk: name for name, e in events.items()}
    return [by_id[row["id"]] for row in response.data["results"]]


def test_viewer_reads_their_teams_events_newest_first(api, viewer, events):
    response = api.as_user(viewer).get(URL)

    assert response.status_code == 200
    assert names(response, events) == ["a-grant", "a-approved", "a-created"]


def test_event_shows_who_did_what_to_which_object_and_the_change(api, viewer, events):
    response = api.as_user(viewer).get(f"{URL}{events['a-approved'].pk}/")

    assert response.status_code == 200
    data = response.data
    assert (data["actor"], data["team"], data["action"]) == (
        "ada-admin",
        "vision",
        "quota_request.approved",
    )
    assert (data["target_type"], data["target_id"]) == ("QuotaRequest", 10)
    assert data["before"] is None
    assert data["after"] == {"state": "pending"}
    assert data["created_at"]


def test_admin_reads_every_event_including_cluster_changes(api, admin, events):
    response = api.as_user(admin).get(URL)

    assert set(names(response, events)) == set(events)


def test_lead_of_another_team_gets_404_for_an_event_by_id(api, other_lead, events):
    response = api.as_user(other_lead).get(f"{URL}{events['a-created'].pk}/")

    assert response.status_code == 404


def test_member_gets_404_for_a_cluster_event(api, member, events):
    response = api.as_user(member).get(f"{URL}{events['cluster'].pk}/")

    assert response.status_code == 404


def test_outsider_reads_no_events(api, outsider, events):
    assert api.as_user(outsider).get(URL).data["count"] == 0


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("team=speech", {"b-created"}),
        ("action=quota_request.approved", {"a-approved"}),
        ("target_type=QuotaGrant", {"a-grant"}),
        ("target_type=QuotaRequest&target_id=10", {"a-created", "a-approved"}),
        ("target_type=Cluster", {"cluster"}),
    ],
)
def test_admin_filters_events(api, admin, events, query, expected):
    response = api.as_user(admin).get(f"{URL}?{query}")

    assert set(names(response, events)) == expected


def test_filtering_by_another_teams_slug_shows_a_lead_nothing(api, lead, events):
    response = api.as_user(lead).get(f"{URL}?team=speech")

    assert response.data["count"] == 0


def test_non_integer_target_id_filter_is_400_on_target_id(api, admin, events):
    response = api.as_user(admin).get(f"{URL}?target_id=ten")

    assert response.status_code == 400
    assert list(response.data) == ["target_id"]
