"""A team's member limits over REST (``/api/v1/teams/{slug}/member-limits/``): anyone who sees
the team reads them with each member's use; its leads and portal admins set and lift them."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants.models import AuditEvent
from tests import factories
from workloads import member_limits
from workloads.models import MemberLimit

pytestmark = pytest.mark.django_db

URL = "/api/v1/teams/vision/member-limits/"


def limit_of(team, user, cluster, **fields):
    return factories.MemberLimitFactory(team=team, user=user, cluster=cluster, **fields)


def test_a_member_lists_the_teams_limits_with_each_members_use(api, team, cluster, lead, member):
    limit = limit_of(team, member, cluster, max_gpus=4, max_running=3, set_by=lead)
    factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=member, gpus=2)
    factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=member, gpus=1)
    factories.InteractiveSessionFactory(team=team, cluster=cluster, owner=member, gpus=1)
    # Not theirs, finished, or in another team: not their use here.
    factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=lead, gpus=5)
    factories.GpuJobFactory(
        team=team, cluster=cluster, submitted_by=member, gpus=5, state="succeeded"
    )

    response = api.as_user(member).get(URL)

    assert response.status_code == 200, response.data
    assert response.data["count"] == 1
    (row,) = response.json()["results"]
    assert row == {
        "id": limit.pk,
        "user": member.username,
        "cluster": cluster.name,
        "max_gpus": 4,
        "max_running": 3,
        "set_by": lead.username,
        "updated_at": row["updated_at"],
        "use": {"gpus": 4, "running": 3},
    }


def test_a_viewer_reads_a_limit_whose_setter_is_gone(api, team, cluster, member, viewer):
    limit = limit_of(team, member, cluster, max_gpus=None, max_running=1, set_by=None)

    response = api.as_user(viewer).get(f"{URL}{limit.pk}/")

    assert response.status_code == 200
    assert response.json() | {"updated_at": None} == {
        "id": limit.pk,
        "user": member.username,
        "cluster": cluster.name,
        "max_gpus": None,
        "max_running": 1,
        "set_by": None,
        "updated_at": None,
        "use": {"gpus": 0, "running": 0},
    }


def test_someone_outside_the_team_gets_404_for_its_limits(api, team, cluster, member, other_lead):
    limit = limit_of(team, member, cluster)
    client = api.as_user(other_lead)

    assert client.get(URL).status_code == 404
    assert client.get(f"{URL}{limit.pk}/").status_code == 404
    assert client.post(URL, {"user": member.username, "cluster": cluster.name}).status_code == 404
    assert client.delete(f"{URL}{limit.pk}/").status_code == 404
    assert MemberLimit.objects.filter(pk=limit.pk).exists()


def test_another_teams_limit_is_404_under_this_team(api, team, other_team, cluster, lead):
    theirs = limit_of(other_team, factories.UserFactory(), cluster)

    assert api.as_user(lead).get(f"{URL}{theirs.pk}/").status_code == 404
    assert api.as_user(lead).delete(f"{URL}{theirs.pk}/").status_code == 404
    assert MemberLimit.objects.filter(pk=theirs.pk).exists()


def test_a_lead_sets_a_members_limit_and_it_is_audited(api, team, cluster, lead, member):
    factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=member, gpus=2)

    response = api.as_user(lead).post(
        URL, {"user": member.username, "cluster": cluster.name, "max_gpus": 2}
    )

    assert response.status_code == 200, response.data
    limit = MemberLimit.objects.get(team=team, user=member, cluster=cluster)
    assert (limit.max_gpus, limit.max_running, limit.set_by) == (2, None, lead)
    assert response.data["id"] == limit.pk
    assert response.data["use"] == {"gpus": 2, "running": 1}
    event = AuditEvent.objects.get(action=AuditEvent.Action.MEMBER_LIMIT_SET)
    assert (event.actor, event.team, event.target_id) == (lead, team, limit.pk)
    assert event.after["max_gpus"] == 2


def test_setting_a_limit_again_changes_it(api, team, cluster, lead, member, admin):
    limit = limit_of(team, member, cluster, max_gpus=2, set_by=lead)

    response = api.as_user(admin).post(
        URL,
        {"user": member.username, "cluster": cluster.name, "max_gpus": None, "max_running": 1},
    )

    assert response.status_code == 200, response.data
    limit.refresh_from_db()
    assert (limit.max_gpus, limit.max_running, limit.set_by) == (None, 1, admin)
    assert MemberLimit.objects.count() == 1
    assert response.data["id"] == limit.pk


def test_a_member_may_not_set_limits(api, team, cluster, member):
    response = api.as_user(member).post(
        URL, {"user": member.username, "cluster": cluster.name, "max_gpus": 8}
    )

    assert response.status_code == 403
    assert "leads" in response.data["detail"]
    assert not MemberLimit.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.MEMBER_LIMIT_SET).exists()


def test_a_member_is_refused_before_their_body_is_read(api, team, member):
    response = api.as_user(member).post(URL, {"user": "nobody", "max_gpus": -1})

    assert response.status_code == 403


def test_a_member_may_not_lift_a_limit(api, team, cluster, lead, member):
    limit = limit_of(team, member, cluster)

    response = api.as_user(member).delete(f"{URL}{limit.pk}/")

    assert response.status_code == 403
    assert MemberLimit.objects.filter(pk=limit.pk).exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"user": "nobody", "max_gpus": 1}, "user"),
        ({"user": "oscar-outsider", "max_gpus": 1}, "user"),
        ({"cluster": "nowhere", "max_gpus": 1}, "cluster"),
        ({}, "max_gpus"),
        ({"max_gpus": None, "max_running": None}, "max_gpus"),
        ({"max_gpus": -1}, "max_gpus"),
        ({"max_running": -2}, "max_running"),
        ({"max_gpus": 2**31}, "max_gpus"),
        ({"max_running": "many"}, "max_running"),
        ({"user": None, "max_gpus": 1}, "user"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    api, team, cluster, lead, member, outsider, body, field
):
    body = {"user": member.username, "cluster": cluster.name} | body

    response = api.as_user(lead).post(URL, body)

    assert response.status_code == 400, response.data
    assert field in response.data, response.data
    assert not MemberLimit.objects.exists()


def test_a_lead_lifts_a_limit_and_it_is_audited(api, team, cluster, lead, member):
    limit = limit_of(team, member, cluster, max_gpus=3)

    response = api.as_user(lead).delete(f"{URL}{limit.pk}/")

    assert response.status_code == 204
    assert not MemberLimit.objects.filter(pk=limit.pk).exists()
    event = AuditEvent.objects.get(action=AuditEvent.Action.MEMBER_LIMIT_REMOVED)
    assert (event.actor, event.team, event.target_id) == (lead, team, limit.pk)
    assert event.before == {
        "user": member.username,
        "cluster": cluster.name,
        "max_gpus": 3,
        "max_running": None,
    }
    assert event.after is None


def test_the_list_costs_a_fixed_number_of_queries_and_each_rows_use(api, team, cluster, lead):
    """Not in ``test_query_counts``: each row's use is counted by the workload apps' counters
    (``member_limits.member_use``), one member at a time. The rest of the list is flat."""
    client = api.as_user(lead)

    def add_limits(n):
        for _ in range(n):
            user = factories.MembershipFactory(team=team).user
            limit_of(team, user, cluster)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            response = client.get(URL, {"page_size": 100})
        assert response.status_code == 200
        return len(captured), response.data["count"]

    add_limits(2)
    few, few_rows = queries()
    add_limits(5)
    many, many_rows = queries()
    user = MemberLimit.objects.select_related("user").first().user
    with CaptureQueriesContext(connection) as one_use:
        member_limits.member_use(team=team, cluster=cluster, user=user)

    assert (few_rows, many_rows) == (2, 7)
    assert many - few == 5 * len(one_use)


def test_the_schema_describes_the_member_limit_endpoints(api, lead):
    schema = api.as_user(lead).get("/api/v1/schema/", {"format": "json"}).json()

    listing = schema["paths"]["/api/v1/teams/{team_slug}/member-limits/"]
    one = schema["paths"]["/api/v1/teams/{team_slug}/member-limits/{id}/"]
    assert set(listing) >= {"get", "post"}
    assert set(one) >= {"get", "delete"}
    assert {"200", "400", "403", "404"} <= set(listing["post"]["responses"])
    assert "204" in one["delete"]["responses"]
    row = schema["components"]["schemas"]["MemberLimit"]["properties"]
    assert {"id", "user", "cluster", "max_gpus", "max_running", "set_by", "use"} <= set(row)
