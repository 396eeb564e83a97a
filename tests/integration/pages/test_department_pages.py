"""Department pages and the department admin's review queue: they see their departments'
teams' requests, decide those within the ceiling, and see the rest as needing a portal admin,
with the arithmetic."""

import pytest

from tenants.models import QuotaRequest
from tests.integration.pages.helpers import get_ok

pytestmark = pytest.mark.django_db

A100 = "NVIDIA-A100-SXM4-80GB"


def test_a_department_admin_finds_their_department_and_queue_on_the_home_page(
    client_as, dept_admin
):
    html = get_ok(client_as(dept_admin), "/").content.decode()

    assert 'data-testid="my-departments"' in html
    assert 'href="/departments/research/"' in html
    assert 'href="/review/"' in html


def test_the_department_page_shows_granted_against_the_ceiling(
    client_as, dept_admin, lead, team, make_grant
):
    make_grant(lead, team, gpus=3, gpu_model=A100)

    response = get_ok(client_as(dept_admin), "/departments/research/")

    (row,) = response.context["quota"]
    assert (row.gpu_model, row.granted, row.ceiling, row.free) == (A100, 3, 8, 5)
    assert 'href="/monitoring/usage/?department=research"' in response.content.decode()


def test_a_member_has_no_department_pages(client_as, lead, research):
    assert client_as(lead).get("/departments/").status_code == 403


def test_the_usage_report_of_a_department_names_it(client_as, dept_admin):
    html = get_ok(client_as(dept_admin), "/monitoring/usage/?department=research").content.decode()

    assert 'data-testid="usage-department"' in html


def test_the_queue_shows_what_needs_a_portal_admin_without_its_forms(
    client_as, dept_admin, lead, team, other_team, other_lead, make_request, make_grant
):
    make_grant(lead, team, gpus=6, gpu_model=A100)
    within = make_request(lead, team, gpus=2, gpu_model=A100)
    above = make_request(lead, team, gpus=3, gpu_model=A100)
    make_request(other_lead, other_team, gpus=1)

    response = get_ok(client_as(dept_admin), "/review/")

    rows = {row.request.pk: row for row in response.context["rows"]}
    assert set(rows) == {within.pk, above.pk}
    assert rows[within.pk].decidable
    assert not rows[above.pk].decidable
    html = response.content.decode()
    assert "research: 6 granted + 3 requested = 9 of its ceiling of 8, over by 1" in html
    assert f'action="/requests/{within.pk}/approve/"' in html
    assert f'action="/requests/{above.pk}/approve/"' not in html


def test_a_department_admin_approves_within_the_ceiling_from_the_queue(
    client_as, dept_admin, lead, team, make_request
):
    quota_request = make_request(lead, team, gpus=2, gpu_model=A100)

    response = client_as(dept_admin).post(f"/requests/{quota_request.pk}/approve/", {}, follow=True)

    assert response.redirect_chain == [("/review/", 302)]
    quota_request.refresh_from_db()
    assert (quota_request.state, quota_request.decided_by) == ("approved", dept_admin)


def test_approving_above_the_ceiling_from_a_page_is_refused_with_the_reason(
    client_as, dept_admin, lead, team, make_request
):
    quota_request = make_request(lead, team, gpus=9, gpu_model=A100)

    response = client_as(dept_admin).post(f"/requests/{quota_request.pk}/approve/", {})

    # Refused as an admin approving their own request is: a 403 saying why.
    assert response.status_code == 403
    assert "over by 1" in response.content.decode()
    quota_request.refresh_from_db()
    assert quota_request.state == QuotaRequest.State.PENDING


def test_ticking_another_departments_request_is_not_a_choice(
    client_as, dept_admin, other_lead, other_team, make_request
):
    theirs = make_request(other_lead, other_team, gpus=1)

    response = client_as(dept_admin).post(
        "/review/decide/", {"requests": [theirs.pk], "decision": "approve"}
    )

    assert response.status_code == 200
    assert response.context["bulk_form"].errors["requests"]
    theirs.refresh_from_db()
    assert theirs.state == QuotaRequest.State.PENDING


def test_ticked_requests_within_the_ceiling_are_approved_the_rest_refused(
    client_as, dept_admin, lead, team, make_request
):
    within = make_request(lead, team, gpus=5, gpu_model=A100)
    above = make_request(lead, team, gpus=5, gpu_model=A100)

    client_as(dept_admin).post(
        "/review/decide/", {"requests": [within.pk, above.pk], "decision": "approve"}
    )

    within.refresh_from_db()
    above.refresh_from_db()
    assert (within.state, above.state) == ("approved", "pending")
