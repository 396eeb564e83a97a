"""The booking calendar page: capacity, granted and free by day as a chart; the earliest window
fills the booking form; a booking is a pending quota request; bad input is a form error."""

import datetime
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tenants.models import QuotaRequest
from tests import factories
from tests.integration.pages.helpers import field_error_html, get_ok, messages_text

pytestmark = pytest.mark.django_db

URL = "/monitoring/calendar/"
A100 = "NVIDIA-A100-SXM4-80GB"


def days(n: int) -> datetime.timedelta:
    return datetime.timedelta(days=n)


@pytest.fixture
def a100(cluster):
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12, nodes=3)


@pytest.fixture
def busy(other_team, cluster, admin, a100):
    """Another team holds 10 of the 12 A100s for the next ten days."""
    today = timezone.localdate()
    return factories.QuotaGrantFactory(
        request__team=other_team,
        request__cluster=cluster,
        request__gpu_model=A100,
        request__gpus=10,
        request__starts_on=today,
        request__ends_on=today + days(9),
        granted_by=admin,
    )


def figure(response) -> dict:
    html = response.content.decode()
    start = html.index('<script id="figure-booking-calendar" type="application/json">')
    body = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return json.loads(body)


def test_the_page_draws_granted_free_and_pending_by_day(client_as, lead, cluster, busy):
    response = get_ok(client_as(lead), f"{URL}?cluster=gpu-east&gpu_model={A100}")

    traces = {trace["name"]: trace for trace in figure(response)["data"]}
    assert traces["granted"]["y"][:11] == [10] * 10 + [0]
    assert traces["free"]["y"][:11] == [2] * 10 + [12]
    assert len(traces["free"]["y"]) == 90
    assert "plotly.min.js" in response.content.decode()
    assert "cdn" not in response.content.decode().lower()


def test_the_nav_the_team_page_and_the_cluster_page_link_to_it(client_as, lead, admin, cluster):
    team_page = get_ok(client_as(lead), "/teams/vision/").content.decode()
    cluster_page = get_ok(client_as(admin), "/monitoring/clusters/gpu-east/").content.decode()

    assert 'href="/monitoring/calendar/"' in team_page
    assert 'data-testid="calendar-link"' in team_page
    assert 'href="/monitoring/calendar/?cluster=gpu-east"' in cluster_page


def test_the_earliest_window_fills_in_the_booking_form(client_as, lead, cluster, busy):
    today = timezone.localdate()

    response = get_ok(
        client_as(lead), f"{URL}?cluster=gpu-east&gpu_model={A100}&find-gpus=8&find-days=7"
    )

    booking = response.context["booking"]
    assert booking["starts_on"].value() == today + days(10)
    assert booking["ends_on"].value() == today + days(16)
    assert booking["gpus"].value() == 8
    assert "8 GPU(s) are free for 7 day(s)" in response.content.decode()


def test_a_lead_books_gpus_as_a_pending_request(client_as, lead, team, cluster, busy):
    today = timezone.localdate()

    response = client_as(lead).post(
        f"{URL}?cluster=gpu-east&gpu_model={A100}",
        {
            "team": "vision",
            "gpus": "8",
            "starts_on": str(today + days(10)),
            "ends_on": str(today + days(16)),
            "justification": "Pre-training.",
        },
        follow=True,
    )

    booked = QuotaRequest.objects.get(team=team)
    assert (booked.state, booked.gpus, booked.gpu_model) == ("pending", 8, A100)
    assert (booked.starts_on, booked.ends_on) == (today + days(10), today + days(16))
    assert any("An admin will review it." in m for m in messages_text(response))


def test_a_booking_ending_before_it_starts_is_a_form_error(client_as, lead, cluster, a100):
    today = timezone.localdate()

    response = client_as(lead).post(
        f"{URL}?cluster=gpu-east&gpu_model={A100}",
        {
            "team": "vision",
            "gpus": "2",
            "starts_on": str(today + days(5)),
            "ends_on": str(today + days(1)),
            "justification": "Pre-training.",
        },
    )

    assert response.status_code == 200
    assert "Must not be before the start date" in field_error_html(response, "id_ends_on")
    assert not QuotaRequest.objects.exists()


def test_a_member_cannot_book_for_a_team_they_do_not_lead(client_as, member, cluster, a100):
    today = timezone.localdate()

    response = client_as(member).post(
        f"{URL}?cluster=gpu-east",
        {
            "team": "vision",
            "gpus": "2",
            "starts_on": str(today),
            "ends_on": str(today + days(1)),
            "justification": "Pre-training.",
        },
    )

    assert response.status_code == 200
    assert "Only team leads book GPUs" in response.content.decode()
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("start=2000-01-01", "id_start"),
        ("end=2000-01-01", "id_end"),
        ("gpu_model=NVIDIA-B200", "id_gpu_model"),
        ("find-gpus=0&find-days=3", "id_find-gpus"),
        ("find-gpus=2&find-days=999", "id_find-days"),
    ],
)
def test_bad_input_is_a_form_error_not_a_500(client_as, lead, cluster, a100, query, field):
    response = client_as(lead).get(f"{URL}?cluster=gpu-east&{query}")

    assert response.status_code == 200
    assert field_error_html(response, field)


def test_the_page_costs_the_same_queries_for_many_teams(client_as, lead, admin, cluster, a100):
    today = timezone.localdate()
    url = f"{URL}?cluster=gpu-east&gpu_model={A100}&end={today + days(365)}"
    client = client_as(lead)

    def count() -> int:
        with CaptureQueriesContext(connection) as captured:
            get_ok(client, url)
        return len(captured)

    few = count()
    for n in range(15):
        factories.QuotaGrantFactory(
            request__cluster=cluster,
            request__gpu_model=A100,
            request__gpus=1,
            request__starts_on=today + days(n * 20),
            granted_by=admin,
        )

    assert count() == few
