"""The quota flow in a real browser: a lead asks, an admin decides, the lead sees the outcome."""

import datetime
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tenants import quota
from tenants.models import QuotaGrant, QuotaRequest
from tests import factories

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_lead_requests_quota_and_admin_approves_fewer_gpus(
    sign_in, screenshot, cluster, team, lead, admin
):
    today = timezone.localdate()
    start = today + datetime.timedelta(days=1)

    # The lead asks for 6 GPUs, first with an end date before the start.
    lead_page = sign_in(lead)
    lead_page.get_by_role("link", name="Vision").click()
    lead_page.get_by_role("link", name="Request quota").click()
    expect(lead_page.get_by_role("heading", name="Request GPU quota for Vision")).to_be_visible()
    expect(lead_page.get_by_label("Start date")).to_have_value(today.isoformat())
    lead_page.get_by_label("GPUs", exact=True).fill("6")
    lead_page.get_by_label("Memory (GiB)").fill("256")
    lead_page.get_by_label("Start date").fill(start.isoformat())
    lead_page.get_by_label("End date").fill(today.isoformat())
    lead_page.get_by_label("Justification").fill("Training the new segmentation model.")
    lead_page.get_by_role("button", name="Submit request").click()

    end_field = lead_page.locator("#field-ends_on")
    expect(end_field.locator(".errorlist")).to_have_text(
        f"Must not be before the start date ({start.isoformat()})."
    )
    expect(lead_page.get_by_label("End date")).to_have_attribute("aria-invalid", "true")
    expect(lead_page.get_by_label("Justification")).to_have_value(
        "Training the new segmentation model."
    )
    screenshot(lead_page, "request-form-error")

    lead_page.get_by_label("End date").fill((start + datetime.timedelta(days=60)).isoformat())
    lead_page.get_by_role("button", name="Submit request").click()

    expect(lead_page).to_have_url(re.compile(r"/teams/vision/$"))
    expect(lead_page.get_by_role("status")).to_contain_text("Requested 6 × nvidia.com/gpu")
    quota_request = QuotaRequest.objects.get(team=team)
    pending_row = lead_page.locator(f"#request-{quota_request.pk}")
    expect(pending_row).to_contain_text("pending")
    expect(pending_row).to_contain_text("256 GiB")

    # The admin sees it in the queue beside the cluster's capacity and approves 4 of the 6.
    admin_page = sign_in(admin)
    expect(admin_page.get_by_test_id("review-link")).to_contain_text("1")
    admin_page.get_by_role("link", name="Review queue").first.click()
    item = admin_page.get_by_test_id("review-item").filter(has_text=f"#{quota_request.pk}")
    expect(item).to_contain_text("Vision asks for 6 × nvidia.com/gpu on gpu-east")
    expect(item.get_by_test_id("capacity-plannable")).to_have_text("16")
    expect(item.get_by_test_id("capacity-granted")).to_have_text("0")
    expect(item.get_by_test_id("capacity-after")).to_have_text("10")
    screenshot(admin_page, "review-queue")

    item.get_by_label("GPUs to grant").fill("4")
    item.get_by_label("Note").first.fill("Four now; ask again when the cluster grows.")
    item.get_by_role("button", name="Approve").click()

    expect(admin_page.get_by_role("status")).to_contain_text(
        f"Approved request #{quota_request.pk}: Vision has 4 × nvidia.com/gpu on GPU East."
    )
    expect(admin_page.get_by_text("Nothing to review.")).to_be_visible()

    # The lead sees the grant on the team page, and the decision with its note.
    lead_page.reload()
    grant = QuotaGrant.objects.get(request=quota_request)
    grants = lead_page.get_by_test_id("active-grants")
    expect(grants.get_by_role("link", name=f"#{grant.pk}")).to_be_visible()
    expect(grants.locator("tbody tr")).to_contain_text("4")
    expect(lead_page.get_by_test_id("past-requests")).to_contain_text(
        "Four now; ask again when the cluster grows."
    )
    screenshot(lead_page, "team-page")


def test_admin_rejects_a_request_with_a_note(sign_in, cluster, team, lead, admin):
    quota_request = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=12, justification="Big sweep."
    )

    admin_page = sign_in(admin)
    admin_page.goto("/review/")
    item = admin_page.get_by_test_id("review-item").filter(has_text=f"#{quota_request.pk}")
    reject = item.get_by_role("form", name=f"Reject request #{quota_request.pk}")
    reject.get_by_label("Note").fill("The sweep fits on the shared pool.")
    reject.get_by_role("button", name="Reject").click()

    expect(admin_page.get_by_role("status")).to_contain_text(
        f"Rejected request #{quota_request.pk}."
    )
    quota_request.refresh_from_db()
    assert quota_request.state == QuotaRequest.State.REJECTED

    lead_page = sign_in(lead)
    lead_page.goto("/teams/vision/")
    past = lead_page.locator(f"#request-{quota_request.pk}")
    expect(past).to_contain_text("Rejected")
    expect(past).to_contain_text("The sweep fits on the shared pool.")


def test_approving_beyond_capacity_shows_the_error_on_the_form(sign_in, cluster, team, lead, admin):
    quota_request = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=20, justification="Everything."
    )

    admin_page = sign_in(admin)
    admin_page.goto("/review/")
    item = admin_page.get_by_test_id("review-item").filter(has_text=f"#{quota_request.pk}")
    expect(item.get_by_test_id("capacity-after")).to_have_text("-4")
    item.get_by_role("button", name="Approve").click()

    item = admin_page.get_by_test_id("review-item").filter(has_text=f"#{quota_request.pk}")
    expect(item.locator(f"#field-approve-{quota_request.pk}-gpus .errorlist")).to_contain_text(
        "Not enough capacity"
    )


def test_lead_cancels_their_pending_request(sign_in, cluster, team, lead):
    quota_request = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=2, justification="Try-out."
    )

    page = sign_in(lead)
    page.goto("/teams/vision/")
    page.get_by_role("button", name=f"Cancel request #{quota_request.pk}").click()

    expect(page.get_by_role("status")).to_contain_text(
        f"Cancelled quota request #{quota_request.pk}."
    )
    expect(
        page.get_by_test_id("past-requests").locator(f"#request-{quota_request.pk}")
    ).to_contain_text("Cancelled")


def test_choosing_a_cluster_offers_only_its_gpu_kinds(sign_in, cluster, team, lead):
    west = factories.ClusterFactory(name="gpu-west", display_name="GPU West")
    factories.GpuCapacityFactory(
        cluster=west, resource_name="nvidia.com/mig-1g.10gb", gpu_model="A100 MIG"
    )

    page = sign_in(lead)
    page.goto("/teams/vision/requests/new/")
    kinds = page.get_by_label("GPU kind")
    expect(kinds.locator("option")).to_have_text(["nvidia.com/gpu (NVIDIA-A100-SXM4-80GB)"])

    page.get_by_label("Cluster").select_option(label="GPU West")

    expect(page.get_by_label("GPU kind").locator("option")).to_have_text(
        ["nvidia.com/mig-1g.10gb (A100 MIG)"]
    )


def test_lead_of_another_team_cannot_open_the_team_page(sign_in, console, team, lead, other_lead):
    page = sign_in(other_lead)
    expect(page.get_by_role("link", name="Vision")).to_have_count(0)
    console.expect(r"status of 404")

    response = page.goto("/teams/vision/")

    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()


def test_signing_out_returns_to_the_sign_in_page(sign_in, lead):
    page = sign_in(lead)

    page.get_by_role("button", name="Sign out").click()

    expect(page.get_by_role("heading", name=re.compile("Sign in"))).to_be_visible()
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))


def test_admin_shrinks_a_grant_and_the_audit_trail_shows_the_change(
    sign_in, screenshot, cluster, team, lead, admin
):
    quota_request = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=8, justification="Serving."
    )
    grant = quota.quota_request_approve(reviewer=admin, quota_request=quota_request)

    page = sign_in(admin)
    page.goto(f"/grants/{grant.pk}/")
    shrink = page.get_by_role("form", name=f"Shrink grant #{grant.pk}")
    shrink.get_by_label("GPUs").fill("3")
    shrink.get_by_label("Note").fill("Half of them sat idle.")
    shrink.get_by_role("button", name="Shrink grant").click()

    expect(page.get_by_role("status")).to_contain_text(
        f"Grant #{grant.pk} is now 3 × nvidia.com/gpu"
    )
    screenshot(page, "grant-detail")

    page.get_by_test_id("nav-menu-reports").locator("summary").click()
    page.get_by_role("link", name="Audit trail").click()
    page.get_by_label("Team").select_option(label="Vision")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"/audit/\?team=vision"))
    shrunk = page.get_by_test_id("audit-events").locator("li").first
    expect(shrunk).to_contain_text("quota_grant.shrunk")
    expect(shrunk).to_contain_text("Half of them sat idle.")
    expect(shrunk.locator("tbody tr")).to_have_text([re.compile(r"GPUs\s*8\s*3")])
    screenshot(page, "audit")

    page.get_by_role("link", name="My teams").click()
    expect(page.get_by_role("row", name=re.compile("Vision"))).to_contain_text("3 × nvidia.com/gpu")
    screenshot(page, "home-admin")
