"""Another team's objects do not exist for you: every way of reaching them by id is a 404.

Team A (``team``) owns a pending request, an active grant and their audit events. The lead of
team B and a user in no team try every endpoint that names one of them; none may learn that
it exists, and nothing changes.
"""

import pytest
from rest_framework.test import APIClient

from tenants.models import Membership, QuotaGrant, QuotaRequest
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def team_a_event(team, lead):
    return factories.AuditEventFactory(team=team, actor=lead, target_id=1)


REACHES = [
    ("get", "/api/v1/teams/vision/", None),
    ("get", "/api/v1/teams/vision/members/", None),
    ("post", "/api/v1/teams/vision/members/", {"username": "lena-lead", "role": "viewer"}),
    ("get", "/api/v1/teams/vision/members/lena-lead/", None),
    ("patch", "/api/v1/teams/vision/members/lena-lead/", {"role": "viewer"}),
    ("delete", "/api/v1/teams/vision/members/lena-lead/", None),
    ("get", "/api/v1/quota-requests/{request}/", None),
    ("post", "/api/v1/quota-requests/{request}/approve/", {}),
    ("post", "/api/v1/quota-requests/{request}/reject/", {"note": "No."}),
    ("post", "/api/v1/quota-requests/{request}/cancel/", {}),
    ("get", "/api/v1/quota-grants/{grant}/", None),
    ("post", "/api/v1/quota-grants/{grant}/revoke/", {}),
    ("post", "/api/v1/quota-grants/{grant}/shrink/", {"gpus": 1}),
    ("get", "/api/v1/audit-events/{event}/", None),
]
REACH_IDS = [f"{method} {path}" for method, path, _ in REACHES]


@pytest.mark.parametrize("user_fixture", ["other_lead", "outsider"])
@pytest.mark.parametrize(
    ("method", "path", "body"), REACHES, ids=[f"{m} {p}" for m, p, _ in REACHES]
)
def test_user_outside_the_team_gets_404_and_changes_nothing(
    api, request, pending_request, grant, team_a_event, user_fixture, method, path, body
):
    user = request.getfixturevalue(user_fixture)
    url = path.format(request=pending_request.pk, grant=grant.pk, event=team_a_event.pk)

    response = getattr(api.as_user(user), method)(url, body)

    assert response.status_code == 404
    assert QuotaRequest.objects.get(pk=pending_request.pk).state == "pending"
    assert QuotaGrant.objects.get(pk=grant.pk).state == "active"
    assert Membership.objects.get(user__username="lena-lead").role == "lead"


@pytest.mark.parametrize(
    "url",
    ["/api/v1/teams/", "/api/v1/quota-requests/", "/api/v1/quota-grants/", "/api/v1/audit-events/"],
)
def test_lead_of_another_team_sees_none_of_team_as_objects_in_lists(
    api, other_lead, pending_request, grant, team_a_event, url
):
    response = api.as_user(other_lead).get(url)

    teams = {row.get("team") or row.get("slug") for row in response.data["results"]}
    assert "vision" not in teams


def test_session_authenticated_browser_must_send_the_csrf_token(lead, team, cluster):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(lead)

    read = browser.get("/api/v1/me/")
    write = browser.post("/api/v1/quota-requests/", {})

    assert read.status_code == 200
    assert write.status_code == 403
    assert "CSRF" in write.data["detail"]
