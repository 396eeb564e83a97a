"""Ids and names in paths that no row can have: an id beyond PostgreSQL's bigint, a NUL byte in
a slug. PostgreSQL refuses both in a query; the portal answers 404 (no such object, as for any
unknown id) without asking it. PostgreSQL's own limits, so this runs on PostgreSQL."""

import pytest

from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

BEYOND_BIGINT = "9223372036854775808"

ID_PATHS = [
    "/api/v1/quota-requests/{}/",
    "/api/v1/quota-grants/{}/",
    "/api/v1/audit-events/{}/",
    "/api/v1/jobs/{}/",
    "/api/v1/jobs/{}/logs/",
    "/api/v1/jobs/{}/events/",
    "/api/v1/tokens/{}/",
    "/requests/{}/cancel/",
    "/grants/{}/",
    "/jobs/{}/",
    "/jobs/{}/live/",
    "/jobs/{}/logs/",
    "/jobs/{}/events/",
    "/jobs/{}/gpus/",
    "/account/tokens/{}/revoke/",
]
NAME_PATHS = [
    "/api/v1/teams/{}/",
    "/api/v1/teams/{}/members/",
    "/api/v1/teams/{}/clusters/",
    "/api/v1/teams/vision/clusters/{}/",
    "/api/v1/teams/vision/members/{}/",
    "/api/v1/teams/{}/queue-policies/",
    "/api/v1/teams/vision/queue-policies/{}/",
    "/api/v1/clusters/{}/",
    "/api/v1/monitoring/teams/{}/pods/",
    "/teams/{}/",
    "/monitoring/teams/{}/",
    "/monitoring/clusters/{}/",
]


@pytest.fixture
def clients(api, client_as, admin, team, cluster):
    factories.GpuJobFactory(team=team, cluster=cluster)
    return api.as_user(admin), client_as(admin)


@pytest.mark.parametrize("path", ID_PATHS)
@pytest.mark.parametrize("number", [BEYOND_BIGINT, "99999999999999999999"])
def test_an_id_beyond_bigint_is_not_found(clients, path, number):
    api, page = clients
    url = path.format(number)

    client = api if path.startswith("/api/") else page
    if path.endswith(("cancel/", "revoke/")):
        answer = client.post(url)
    elif path.startswith("/api/v1/tokens/"):
        answer = client.delete(url)  # a token is only ever revoked by id
    else:
        answer = client.get(url)

    assert answer.status_code == 404, answer.content[:300]


@pytest.mark.parametrize("path", NAME_PATHS)
def test_a_name_with_a_nul_byte_is_not_found(clients, path):
    api, page = clients
    url = path.format("vi%00sion")

    answer = (api if path.startswith("/api/") else page).get(url)

    assert answer.status_code == 404, answer.content[:300]
