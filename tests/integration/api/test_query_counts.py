"""Every list costs the same number of SQL queries whether it shows 5 rows or 60."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests import factories

pytestmark = pytest.mark.django_db


def add_teams(n, *, admin, **_):
    for team in factories.TeamFactory.create_batch(n):
        factories.MembershipFactory(team=team, user=admin, role="lead")


def add_members(n, *, team, **_):
    factories.MembershipFactory.create_batch(n, team=team)


def add_clusters(n, **_):
    for cluster in factories.ClusterFactory.create_batch(n):
        factories.GpuCapacityFactory(cluster=cluster)
        factories.GpuCapacityFactory(cluster=cluster, resource_name="nvidia.com/mig-1g.10gb")


def add_requests(n, *, team, cluster, lead, admin, **_):
    factories.QuotaRequestFactory.create_batch(
        n, team=team, cluster=cluster, requested_by=lead, decided_by=admin
    )


def add_grants(n, *, team, cluster, lead, admin, **_):
    factories.QuotaGrantFactory.create_batch(
        n,
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        granted_by=admin,
    )


def add_events(n, *, team, lead, **_):
    for i in range(n):
        factories.AuditEventFactory(team=team, actor=lead, target_id=i, after={"gpus": i})


def add_sessions(n, *, team, cluster, **_):
    for _ in range(n):
        session = factories.InteractiveSessionFactory(
            team=team, cluster=cluster, state="running", server_address="10.0.0.1:8888"
        )
        factories.HomeVolumeFactory(team=team, cluster=cluster, owner=session.owner)


def add_layouts(n, *, team, cluster, lead, admin, **_):
    for _ in range(n):
        factories.LayoutRequestFactory(
            source_grant=factories.QuotaGrantFactory(
                request__team=team,
                request__cluster=cluster,
                request__gpu_model="NVIDIA-A100-SXM4-80GB",
                granted_by=admin,
            ),
            requested_by=lead,
            decided_by=admin,
        )


# Not here: ``teams/{slug}/member-limits/``, whose rows each carry the member's use now, counted
# per row by the workload apps' counters (``workloads.member_limits.member_use``); the rest of
# that list is flat (``test_member_limits_api``).
LISTS = [
    ("/api/v1/teams/", add_teams, "admin"),
    ("/api/v1/teams/vision/members/", add_members, "lead"),
    ("/api/v1/clusters/", add_clusters, "lead"),
    ("/api/v1/quota-requests/", add_requests, "lead"),
    ("/api/v1/quota-requests/review-queue/", add_requests, "admin"),
    ("/api/v1/quota-grants/", add_grants, "lead"),
    ("/api/v1/audit-events/", add_events, "lead"),
    ("/api/v1/sessions/", add_sessions, "lead"),
    ("/api/v1/sharing-layouts/", add_layouts, "lead"),
]


def queries_for(client, url):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, {"page_size": 100})
    assert response.status_code == 200
    return len(captured), response.data["count"]


@pytest.mark.parametrize(("url", "add_rows", "reader"), LISTS, ids=[u for u, *_ in LISTS])
def test_list_query_count_does_not_grow_with_the_rows(
    api, request, team, cluster, lead, admin, url, add_rows, reader
):
    rows = {"team": team, "cluster": cluster, "lead": lead, "admin": admin}
    client = api.as_user(request.getfixturevalue(reader))
    add_rows(5, **rows)
    few, few_count = queries_for(client, url)

    add_rows(55, **rows)
    many, many_count = queries_for(client, url)

    assert many_count >= few_count + 55
    assert many == few, f"{url}: {few} queries for {few_count} rows, {many} for {many_count}"


def test_me_query_count_does_not_grow_with_the_users_teams(api, lead):
    client = api.as_user(lead)
    with CaptureQueriesContext(connection) as one_team:
        client.get("/api/v1/me/")
    for team in factories.TeamFactory.create_batch(20):
        factories.MembershipFactory(team=team, user=lead)

    with CaptureQueriesContext(connection) as many_teams:
        client.get("/api/v1/me/")

    assert len(many_teams) == len(one_team)
