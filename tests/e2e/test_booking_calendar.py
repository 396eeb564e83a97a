"""The booking calendar in a real browser: a lead opens it from the nav, sees the chart drawn
with the locally served Plotly, asks for the earliest window for 8 GPUs for a week, books it,
and finds the request pending on the team page."""

import datetime
import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tenants.models import QuotaRequest
from tests import factories

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

A100 = "NVIDIA-A100-SXM4-80GB"


def test_a_lead_books_the_earliest_free_week_from_the_calendar(
    sign_in, screenshot, cluster, team, other_team, lead, admin
):
    today = timezone.localdate()
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12, nodes=3)
    factories.QuotaGrantFactory(
        request__team=other_team,
        request__cluster=cluster,
        request__gpu_model=A100,
        request__gpus=10,
        request__starts_on=today,
        request__ends_on=today + datetime.timedelta(days=9),
        granted_by=admin,
    )
    first = today + datetime.timedelta(days=10)
    last = first + datetime.timedelta(days=6)

    page = sign_in(lead)
    page.get_by_test_id("nav-menu-reports").locator("summary").click()
    page.get_by_role("link", name="Booking calendar").first.click()
    expect(page.get_by_role("heading", name="Booking calendar", exact=True)).to_be_visible()
    page.get_by_label("GPU model").select_option(A100)
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_test_id("calendar-summary")).to_contain_text(f"12 {A100} GPUs")
    chart = page.get_by_test_id("chart-booking-calendar").locator(".chart-plot")
    expect(chart).to_have_attribute("data-drawn", "true")

    search = page.get_by_test_id("window-search")
    search.get_by_label("GPUs").fill("8")
    search.get_by_label("For how many days").fill("7")
    search.get_by_role("button", name="Find the earliest window").click()
    expect(page.get_by_test_id("window-answer")).to_contain_text(
        f"8 GPU(s) are free for 7 day(s) from {first.isoformat()} to {last.isoformat()}."
    )
    booking = page.get_by_test_id("booking-form")
    expect(booking.get_by_label("From")).to_have_value(first.isoformat())
    expect(booking.get_by_label("To (included)")).to_have_value(last.isoformat())
    screenshot(page, "booking-calendar")

    booking.get_by_label("Justification").fill("A week of pre-training.")
    booking.get_by_role("button", name="Request these GPUs").click()

    expect(page).to_have_url(re.compile(r"/teams/vision/$"))
    expect(page.get_by_role("status")).to_contain_text(
        f"Requested 8 × {A100} on GPU East from {first.isoformat()} to {last.isoformat()}."
    )
    booked = QuotaRequest.objects.get(team=team)
    assert (booked.state, booked.gpus, booked.starts_on, booked.ends_on) == (
        "pending",
        8,
        first,
        last,
    )
    expect(page.locator(f"#request-{booked.pk}")).to_contain_text("pending")
