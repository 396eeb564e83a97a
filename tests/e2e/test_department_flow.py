"""Delegated approval in a real browser: a department admin finds their teams' requests in the
review queue, approves the one within the department's ceiling, and sees the other waiting for
a portal admin with the arithmetic."""

import re

import pytest
from playwright.sync_api import expect

from tenants import quota
from tenants.models import QuotaRequest

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

A100 = "NVIDIA-A100-SXM4-80GB"


def test_department_admin_approves_within_the_ceiling(
    sign_in, screenshot, cluster, team, lead, admin, dept_admin
):

    def ask(gpus: int) -> QuotaRequest:
        return quota.quota_request_create(
            requested_by=lead,
            team=team,
            cluster=cluster,
            gpus=gpus,
            gpu_model=A100,
            justification="Training the next vision model.",
        )

    quota.quota_request_approve(reviewer=admin, quota_request=ask(5))
    within, above = ask(3), ask(4)

    page = sign_in(dept_admin)
    page.get_by_test_id("department-review-link").click()
    expect(page).to_have_url(re.compile(r"/review/$"))

    above_item = page.get_by_test_id("review-item").filter(has_text=f"#{above.pk}")
    expect(above_item.get_by_test_id("delegation")).to_have_text(
        "Needs a portal admin: approving would exceed the ceiling (research: 5 granted + 4 "
        "requested = 9 of its ceiling of 8, over by 1)."
    )
    expect(above_item.get_by_role("button", name="Approve")).to_have_count(0)
    within_item = page.get_by_test_id("review-item").filter(has_text=f"#{within.pk}")
    expect(within_item.get_by_test_id("delegation")).to_contain_text("Within the ceiling")
    # The per-model table stays inside its capacity box at a laptop's width.
    capacity = within_item.get_by_test_id("capacity").bounding_box()
    models = within_item.get_by_test_id("model-capacity").bounding_box()
    assert models["x"] + models["width"] <= capacity["x"] + capacity["width"], (models, capacity)
    screenshot(page, "department-review-queue")

    within_item.get_by_role("button", name="Approve").click()

    expect(page.get_by_role("status")).to_contain_text(f"Approved request #{within.pk}")
    within.refresh_from_db()
    assert (within.state, within.decided_by) == ("approved", dept_admin)

    # The department page now shows its teams holding the whole ceiling.
    page.goto("/departments/research/")
    row = page.get_by_test_id("department-quota").locator(f'tr[data-model="{A100}"]')
    expect(row).to_contain_text("8")
    expect(row.locator("td").nth(3)).to_have_text("0")
