"""Delegated approval: a department admin decides the requests of their departments' teams
while approving keeps every department above the team within its ceiling, and nothing else.
Delegation never widens: above the ceiling, a team outside the department or their own request
is refused with the reason (the arithmetic when it is the ceiling), and stays pending."""

import datetime

import pytest

from tenants.models import AuditEvent, DepartmentCeiling, Membership, QuotaRequest
from tests import factories

pytestmark = pytest.mark.django_db

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
URL = "/api/v1/quota-requests/"


@pytest.fixture
def models(cluster, research):
    """Beside research's A100 (12, a ceiling of 8), 4 H100 without a ceiling."""
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=H100, allocatable=4, nodes=1)


@pytest.fixture(autouse=True)
def _models(models):
    """Every test here has the cluster's models."""


def request_of(team, cluster, gpus, requested_by, model=A100, **fields):
    return factories.QuotaRequestFactory(
        team=team, cluster=cluster, gpu_model=model, gpus=gpus, requested_by=requested_by, **fields
    )


def grant_of(team, cluster, gpus, lead, admin, model=A100):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__gpu_model=model,
        request__gpus=gpus,
        request__requested_by=lead,
        granted_by=admin,
    )


def approve(api, user, quota_request, **body):
    return api.as_user(user).post(f"{URL}{quota_request.pk}/approve/", body)


def reject(api, user, quota_request, note="Not this quarter."):
    return api.as_user(user).post(f"{URL}{quota_request.pk}/reject/", {"note": note})


def pending(quota_request) -> bool:
    quota_request.refresh_from_db()
    return quota_request.state == QuotaRequest.State.PENDING


def test_a_department_admin_approves_within_the_ceiling(
    api, dept_admin, lead, team, cluster, admin
):
    grant_of(team, cluster, 4, lead, admin)
    quota_request = request_of(team, cluster, 4, lead)

    response = approve(api, dept_admin, quota_request, note="Fits research's A100s.")

    assert response.status_code == 201
    assert response.data["gpus"] == 4
    event = AuditEvent.objects.get(
        action=AuditEvent.Action.QUOTA_REQUEST_APPROVED, target_id=quota_request.pk
    )
    assert event.actor == dept_admin


def test_a_department_admin_is_refused_above_the_ceiling_with_the_arithmetic(
    api, dept_admin, lead, team, cluster, admin
):
    grant_of(team, cluster, 6, lead, admin)
    quota_request = request_of(team, cluster, 4, lead)

    response = approve(api, dept_admin, quota_request)

    assert response.status_code == 403
    assert "Needs a portal admin" in response.data["detail"]
    assert (
        "research: 6 granted + 4 requested = 10 of its ceiling of 8, over by 2"
        in (response.data["detail"])
    )
    assert pending(quota_request)


def test_a_department_admin_may_approve_fewer_gpus_to_stay_within_the_ceiling(
    api, dept_admin, lead, team, cluster, admin
):
    grant_of(team, cluster, 6, lead, admin)
    quota_request = request_of(team, cluster, 4, lead)

    response = approve(api, dept_admin, quota_request, gpus=2)

    assert response.status_code == 201
    assert response.data["gpus"] == 2


def test_a_department_admin_cannot_reject_above_the_ceiling_either(
    api, dept_admin, lead, team, cluster
):
    quota_request = request_of(team, cluster, 9, lead)

    response = reject(api, dept_admin, quota_request)

    assert response.status_code == 403
    assert "over by 1" in response.data["detail"]
    assert pending(quota_request)


def test_a_department_admin_rejects_within_the_ceiling(api, dept_admin, lead, team, cluster):
    quota_request = request_of(team, cluster, 2, lead)

    response = reject(api, dept_admin, quota_request)

    assert response.status_code == 200
    assert response.data["state"] == "rejected"
    assert response.data["decided_by"] == dept_admin.username


def test_a_portal_admin_still_approves_above_the_ceiling(api, admin, lead, team, cluster, research):
    quota_request = request_of(team, cluster, 10, lead)

    assert approve(api, admin, quota_request).status_code == 201


def test_a_department_admin_is_refused_a_team_outside_the_department(
    api, dept_admin, other_team, other_lead, cluster
):
    # A member of the other team, so it may see the request: still not theirs to decide.
    factories.MembershipFactory(team=other_team, user=dept_admin, role=Membership.Role.MEMBER)
    quota_request = request_of(other_team, cluster, 1, other_lead)

    response = approve(api, dept_admin, quota_request)

    assert response.status_code == 403
    assert "not in a department you administer" in response.data["detail"]
    assert pending(quota_request)


def test_a_team_outside_the_department_is_not_even_visible(
    api, dept_admin, other_team, other_lead, cluster
):
    quota_request = request_of(other_team, cluster, 1, other_lead)

    assert approve(api, dept_admin, quota_request).status_code == 404
    assert pending(quota_request)


def test_a_department_admin_cannot_approve_their_own_request(api, dept_admin, team, cluster):
    factories.MembershipFactory(team=team, user=dept_admin, role=Membership.Role.LEAD)
    quota_request = request_of(team, cluster, 1, dept_admin)

    response = approve(api, dept_admin, quota_request)

    assert response.status_code == 403
    assert "you made yourself" in response.data["detail"]
    assert pending(quota_request)


def test_a_request_of_a_model_without_a_ceiling_needs_a_portal_admin(
    api, dept_admin, lead, team, cluster
):
    quota_request = request_of(team, cluster, 1, lead, model=H100)

    response = approve(api, dept_admin, quota_request)

    assert response.status_code == 403
    assert "has a ceiling for NVIDIA-H100-80GB-HBM3" in response.data["detail"]


def test_a_request_of_any_model_needs_a_portal_admin(api, dept_admin, lead, team, cluster):
    quota_request = request_of(team, cluster, 1, lead, model="")

    response = approve(api, dept_admin, quota_request)

    assert response.status_code == 403
    assert "names no GPU model" in response.data["detail"]


def test_a_nested_departments_grants_count_toward_its_parents_ceiling(
    api, dept_admin, research, lead, team, other_team, other_lead, cluster, admin
):
    speech = factories.DepartmentFactory(slug="research-speech", parent=research)
    other_team.department = speech
    other_team.save()
    grant_of(other_team, cluster, 6, other_lead, admin)
    quota_request = request_of(team, cluster, 4, lead)

    response = approve(api, dept_admin, quota_request)

    assert response.status_code == 403
    assert "research: 6 granted + 4 requested = 10" in response.data["detail"]


def test_the_parents_ceiling_binds_a_nested_departments_admin(
    api, research, lead, team, cluster, admin
):
    vision_dept = factories.DepartmentFactory(slug="research-vision", parent=research)
    DepartmentCeiling.objects.create(
        department=vision_dept, cluster=cluster, gpu_model=A100, gpus=10
    )
    team.department = vision_dept
    team.save()
    child_admin = factories.UserFactory(username="cleo-child-admin")
    vision_dept.admins.add(child_admin)
    grant_of(team, cluster, 6, lead, admin)
    quota_request = request_of(team, cluster, 4, lead)

    response = approve(api, child_admin, quota_request)

    # Within research-vision's 10, but not within research's 8 above it.
    assert response.status_code == 403
    assert "research: 6 granted + 4 requested = 10 of its ceiling of 8" in response.data["detail"]
    assert "research-vision:" not in response.data["detail"]


def test_grants_outside_the_requests_period_do_not_count(
    api, dept_admin, lead, team, cluster, admin, today
):
    old = grant_of(team, cluster, 6, lead, admin)
    old.ends_on = old.starts_on = today
    old.save()
    quota_request = request_of(
        team,
        cluster,
        4,
        lead,
        starts_on=today + datetime.timedelta(days=1),
        ends_on=today + datetime.timedelta(days=10),
    )

    assert approve(api, dept_admin, quota_request).status_code == 201


def test_the_review_queue_shows_a_department_admin_what_needs_a_portal_admin(
    api, dept_admin, lead, team, other_team, other_lead, cluster, admin
):
    grant_of(team, cluster, 6, lead, admin)
    within = request_of(team, cluster, 2, lead)
    above = request_of(team, cluster, 3, lead)
    request_of(other_team, cluster, 1, other_lead)

    items = api.as_user(dept_admin).get(f"{URL}review-queue/").data["results"]

    by_id = {item["id"]: item["delegation"] for item in items}
    assert set(by_id) == {within.pk, above.pk}
    assert by_id[within.pk]["allowed"] is True
    assert by_id[above.pk] == {
        "allowed": False,
        "reason": "Needs a portal admin: approving would exceed the ceiling (research: 6 "
        "granted + 3 requested = 9 of its ceiling of 8, over by 1).",
    }


def test_a_portal_admins_review_queue_has_no_delegation(api, admin, lead, team, cluster, research):
    request_of(team, cluster, 2, lead)

    (item,) = api.as_user(admin).get(f"{URL}review-queue/").data["results"]

    assert item["delegation"] is None


def test_a_user_who_administers_no_department_still_has_no_review_queue(api, lead, research):
    response = api.as_user(lead).get(f"{URL}review-queue/")

    assert response.status_code == 403


def test_a_department_admin_sees_the_departments_requests(
    api, dept_admin, lead, team, other_team, other_lead, cluster
):
    mine = request_of(team, cluster, 2, lead)
    request_of(other_team, cluster, 1, other_lead)

    ids = [r["id"] for r in api.as_user(dept_admin).get(URL).data["results"]]

    assert ids == [mine.pk]
