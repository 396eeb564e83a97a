"""Every page works under the Content-Security-Policy in a real browser: the fixtures in
conftest.py fail a test on any violation, so each page here is opened, used a little, and left
with no violation reported; and a violation is seen when there is one."""

import datetime

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tenants import quota
from tests import factories

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_an_injected_inline_script_is_refused_and_reported(sign_in, lead, console):
    page = sign_in(lead)

    page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.injectedRan = true";
            document.body.append(script);
        }"""
    )

    assert page.evaluate("window.injectedRan === undefined")
    page.evaluate("0")  # the report has arrived
    assert any("script-src-elem refused inline" in v for v in console.csp_violations)
    console.csp_violations.clear()
    console.expect("Content Security Policy")


def pending_request(lead, team, cluster):
    """A request in the review queue (the team and review pages show it)."""
    return quota.quota_request_create(
        requested_by=lead,
        team=team,
        cluster=cluster,
        gpus=2,
        ends_on=timezone.localdate() + datetime.timedelta(days=30),
        justification="More runs.",
    )


def test_the_pages_of_a_lead_work_under_the_policy(sign_in, cluster, team, lead, admin):
    factories.TeamClusterFactory(team=team, cluster=cluster)
    job = factories.GpuJobFactory(team=team, cluster=cluster, submitted_by=lead, name="trainer")
    pending_request(lead, team, cluster)
    page = sign_in(lead)

    for url, heading in [
        ("/", "My teams"),
        (f"/teams/{team.slug}/", team.name),
        (f"/teams/{team.slug}/requests/new/", f"Request GPU quota for {team.name}"),
        ("/audit/", "Audit trail"),
        ("/jobs/", "GPU jobs"),
        ("/jobs/new/", "Submit a GPU job"),
        ("/monitoring/usage/", "GPU usage"),
        ("/monitoring/notifications/", "Notifications"),
        ("/monitoring/calendar/", "Booking calendar"),
    ]:
        page.goto(url)
        expect(page.get_by_role("heading", level=1)).to_contain_text(heading)

    # htmx at work: the job page loads its panels, the job form swaps the GPU model field.
    page.goto(f"/jobs/{job.pk}/")
    expect(page.locator("#job-logs")).not_to_have_attribute("hx-trigger", "load")
    expect(page.locator("#job-events")).not_to_have_attribute("hx-trigger", "load")
    page.goto("/jobs/new/")
    with page.expect_response(lambda r: r.request.headers.get("hx-request") == "true"):
        page.get_by_label("Cluster").select_option(str(cluster.pk))

    # The token page: make one, see it once.
    page.get_by_role("link", name="API tokens").click()
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Make token").click()
    expect(page.get_by_test_id("new-token-secret")).to_contain_text("gpup_")


def test_the_api_docs_page_draws_swagger_ui_under_the_policy(sign_in, outsider):
    page = sign_in(outsider)

    page.goto("/api/v1/docs/")

    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GPU portal API")
    expect(page.locator(".opblock-tag").first).to_be_visible()
    page.locator(".opblock-summary").first.click()
    expect(page.locator(".opblock-body").first).to_be_visible()


def test_the_pages_of_an_admin_work_under_the_policy(sign_in, cluster, team, lead, console):
    admin = factories.AdminFactory(username="sue-superuser", is_superuser=True)
    console.expect(r"/favicon\.ico")  # Django's admin pages name no icon
    pending_request(lead, team, cluster)
    page = sign_in(admin)

    for url, heading in [
        ("/review/", "Review queue"),
        ("/monitoring/clusters/", "Clusters"),
        ("/django-admin/", "Site administration"),
        (f"/django-admin/clusters/cluster/{cluster.pk}/change/", "Change cluster"),
        ("/django-admin/accounts/apitoken/", "Select API token to view"),
    ]:
        page.goto(url)
        expect(page.get_by_role("heading", level=1)).to_contain_text(heading)
