"""Every page, number and date parameter of the API refuses a value out of range with a 400
that names it, before anything is queried; none is quietly replaced by a default, and none
reaches the database or Prometheus (core/params.py, portal/api.py, monitoring/forms.py)."""

import datetime

import pytest
from django.utils import timezone

from tests import factories

pytestmark = pytest.mark.django_db

LISTS = [
    "/api/v1/teams/",
    "/api/v1/teams/vision/members/",
    "/api/v1/teams/vision/clusters/",
    "/api/v1/clusters/",
    "/api/v1/quota-requests/",
    "/api/v1/quota-requests/review-queue/",
    "/api/v1/quota-grants/",
    "/api/v1/audit-events/",
    "/api/v1/jobs/",
    "/api/v1/tokens/",
    "/api/v1/notifications/",
]
NOT_WHOLE_NUMBERS = ["abc", "1.5", "1e3", "--1", "1_0", "٣"]


@pytest.fixture
def admin_api(api, admin, team, cluster):
    return api.as_user(admin)


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("page", ["0", "-1", "99999999999999999999", *NOT_WHOLE_NUMBERS])
def test_every_list_refuses_a_page_number_out_of_range(admin_api, url, page):
    response = admin_api.get(url, {"page": page})

    assert response.status_code == 400, response.content
    assert response.json() == {"page": ["Must be a whole number from 1 to 9223372036854775807."]}


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("size", ["0", "-1", "1001", "99999999999999999999", *NOT_WHOLE_NUMBERS])
def test_every_list_refuses_a_page_size_out_of_range(admin_api, url, size):
    response = admin_api.get(url, {"page_size": size})

    assert response.status_code == 400, response.content
    assert response.json() == {"page_size": ["Must be a whole number from 1 to 1000."]}


def test_page_and_page_size_in_range_are_used(admin_api, team):
    factories.TeamFactory(slug="speech")
    factories.TeamFactory(slug="tts")

    response = admin_api.get("/api/v1/teams/", {"page_size": "1", "page": "2", "ordering": "slug"})

    assert response.status_code == 200
    assert [t["slug"] for t in response.json()["results"]] == ["tts"]


def test_a_page_past_the_end_is_a_page_that_does_not_exist(admin_api):
    assert admin_api.get("/api/v1/teams/", {"page": "3"}).status_code == 404


@pytest.mark.parametrize("target_id", ["-1", "9223372036854775808", "99999999999999999999"])
def test_audit_events_refuse_a_target_id_out_of_range(admin_api, target_id):
    response = admin_api.get("/api/v1/audit-events/", {"target_id": target_id})

    assert response.status_code == 400
    assert "target_id" in response.json()


# --- the usage report --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"end": "2999-01-01"}, "end"),  # a far-future end: once a 500
        ({"end": "9999-12-31"}, "end"),  # the day after is past the calendar's end
        ({"start": "2026-02-30"}, "start"),  # shaped like a date, but none
        ({"end": "2026-13-45"}, "end"),
        ({"start": "10000-01-01"}, "start"),
        ({"start": "1900-01-01"}, "start"),  # longer than a report may span
        ({"bucket": "fortnight"}, "bucket"),
    ],
)
def test_the_usage_report_refuses_dates_out_of_range(admin_api, params, field):
    response = admin_api.get("/api/v1/usage-report/", params)

    assert response.status_code == 400, response.content
    assert field in response.json()


def test_the_usage_report_may_end_today(admin_api):
    today = timezone.localdate().isoformat()

    response = admin_api.get("/api/v1/usage-report/", {"end": today, "bucket": "total"})

    assert response.status_code == 200, response.content


def test_the_usage_report_page_and_csv_refuse_a_far_future_end(client_as, admin):
    page = client_as(admin)

    html = page.get("/monitoring/usage/", {"end": "2999-01-01"})
    csv = page.get("/monitoring/usage.csv", {"end": "2999-01-01"})

    assert html.status_code == 200  # the page shows the form with its error
    assert html.context["form"].errors["end"] == ["The report may end today at the latest."]
    assert csv.status_code == 400


# --- metrics windows ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"window": "custom", "start": "0001-01-01T00:00"},
        {"window": "custom", "start": "2026-01-01T00:00", "end": "9999-12-31T23:59"},
        {"start": "1970-01-01T00:00"},  # out of range even where the window ignores it
        {"window": "fortnight"},
    ],
)
def test_a_metrics_window_out_of_range_is_a_400_before_any_cluster_is_asked(
    api, lead, team, cluster, params
):
    factories.TeamClusterFactory(team=team, cluster=cluster)  # no Prometheus: that would be a 503

    response = api.as_user(lead).get(f"/api/v1/monitoring/teams/{team.slug}/utilisation/", params)

    assert response.status_code == 400, response.content


def test_another_teams_metrics_are_a_404_whatever_the_window(api, other_lead, team):
    response = api.as_user(other_lead).get(
        f"/api/v1/monitoring/teams/{team.slug}/utilisation/", {"window": "fortnight"}
    )

    assert response.status_code == 404


def test_the_window_form_reads_a_window_within_range(lead):
    from monitoring.forms import WindowForm

    now = timezone.now()
    form = WindowForm(
        {"window": "custom", "start": (now - datetime.timedelta(days=30)).isoformat()}, now=now
    )

    assert form.is_valid(), form.errors
