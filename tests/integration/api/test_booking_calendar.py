"""The booking calendar over REST: a cluster's GPUs of a model day by day, the earliest window
with N free for K days, a booking as a normal quota request, and 400s naming the field."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants.models import QuotaRequest
from tests import factories

pytestmark = pytest.mark.django_db

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
CALENDAR = "/api/v1/clusters/gpu-east/calendar/"
WINDOW = "/api/v1/clusters/gpu-east/earliest-window/"


def days(n: int) -> datetime.timedelta:
    return datetime.timedelta(days=n)


@pytest.fixture
def models(cluster):
    """gpu-east's 16 GPUs: 12 A100 and 4 H100."""
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12, nodes=3)
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=H100, allocatable=4, nodes=1)


def grant(team, cluster, admin, *, gpus, starts_on, ends_on, model=A100):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__gpu_model=model,
        request__gpus=gpus,
        request__starts_on=starts_on,
        request__ends_on=ends_on,
        granted_by=admin,
    )


def test_the_calendar_shows_capacity_granted_pending_and_free_by_day(
    api, lead, admin, team, other_team, cluster, models, today
):
    grant(team, cluster, admin, gpus=8, starts_on=today + days(2), ends_on=today + days(4))
    grant(other_team, cluster, admin, gpus=2, starts_on=today, ends_on=None, model=H100)
    factories.QuotaRequestFactory(
        team=team,
        cluster=cluster,
        gpu_model=A100,
        gpus=3,
        starts_on=today + days(4),
        ends_on=today + days(5),
    )

    response = api.as_user(lead).get(
        CALENDAR, {"gpu_model": A100, "end": (today + days(6)).isoformat()}
    )

    assert response.status_code == 200
    assert response.data["capacity"] == 12
    assert response.data["start"] == today.isoformat()
    rows = [(d["granted"], d["pending"], d["free"]) for d in response.data["days"]]
    assert rows == [
        (0, 0, 12),
        (0, 0, 12),
        (8, 0, 4),
        (8, 0, 4),
        (8, 3, 4),
        (0, 3, 12),
        (0, 0, 12),
    ]


def test_the_calendar_defaults_to_90_days_of_any_model(api, lead, cluster, today):
    response = api.as_user(lead).get(CALENDAR)

    assert response.status_code == 200
    assert len(response.data["days"]) == 90
    assert response.data["gpu_model"] == ""
    assert response.data["days"][-1]["day"] == (today + days(89)).isoformat()
    assert response.data["days"][0]["free"] == 16


def test_the_calendar_costs_the_same_queries_for_many_grants(
    api, lead, admin, cluster, models, today
):
    def count():
        with CaptureQueriesContext(connection) as captured:
            response = api.as_user(lead).get(
                CALENDAR, {"gpu_model": A100, "end": str(today + days(365))}
            )
        assert response.status_code == 200
        return len(captured)

    grant(factories.TeamFactory(), cluster, admin, gpus=1, starts_on=today, ends_on=None)
    few = count()
    for n in range(20):
        start = today + days(n * 10)
        grant(factories.TeamFactory(), cluster, admin, gpus=1, starts_on=start, ends_on=None)

    assert count() == few


def test_the_earliest_window_starts_when_enough_is_free_for_all_its_days(
    api, lead, admin, other_team, cluster, models, today
):
    grant(other_team, cluster, admin, gpus=10, starts_on=today, ends_on=today + days(9))

    response = api.as_user(lead).get(WINDOW, {"gpu_model": A100, "gpus": 8, "days": 7})

    assert response.status_code == 200
    assert response.data["found"] is True
    assert response.data["window"] == {
        "starts_on": (today + days(10)).isoformat(),
        "ends_on": (today + days(16)).isoformat(),
        "gpus": 8,
        "free": 12,
    }


def test_no_window_within_the_horizon_says_so(api, lead, admin, other_team, cluster, models, today):
    grant(other_team, cluster, admin, gpus=12, starts_on=today, ends_on=None)

    response = api.as_user(lead).get(WINDOW, {"gpu_model": A100, "gpus": 1, "days": 1})

    assert response.status_code == 200
    assert response.data["found"] is False
    assert response.data["window"] is None
    assert "No window of 1 day(s) with 1 GPU(s) free" in response.data["detail"]


def test_a_window_found_is_booked_as_a_pending_request_that_approval_accepts(
    api, lead, admin, other_team, cluster, models, today
):
    grant(other_team, cluster, admin, gpus=12, starts_on=today, ends_on=today + days(2))
    window = api.as_user(lead).get(WINDOW, {"gpu_model": A100, "gpus": 8, "days": 7}).data

    booked = api.post(
        "/api/v1/quota-requests/",
        {
            "team": "vision",
            "cluster": "gpu-east",
            "gpu_model": A100,
            "gpus": 8,
            "starts_on": window["window"]["starts_on"],
            "ends_on": window["window"]["ends_on"],
            "justification": "Training run.",
        },
    )

    assert booked.status_code == 201
    assert booked.data["state"] == "pending"
    approved = api.as_user(admin).post(f"/api/v1/quota-requests/{booked.data['id']}/approve/", {})
    assert approved.status_code == 201
    assert approved.data["starts_on"] == (today + days(3)).isoformat()


def test_overlapping_bookings_beyond_capacity_are_refused_with_the_arithmetic(
    api, lead, admin, other_team, cluster, models, today
):
    grant(other_team, cluster, admin, gpus=8, starts_on=today + days(10), ends_on=today + days(17))
    request = factories.QuotaRequestFactory(
        team=factories.TeamFactory(),
        cluster=cluster,
        gpu_model=A100,
        gpus=6,
        starts_on=today + days(14),
        ends_on=today + days(20),
    )

    response = api.as_user(admin).post(f"/api/v1/quota-requests/{request.pk}/approve/", {})

    assert response.status_code == 400
    assert response.data == {
        "gpus": [
            f"Not enough {A100} capacity: gpu-east can grant 12 × {A100} (12 at overcommit "
            "1.00), 8 are already granted for that period, so at most 4 more; 6 would exceed it "
            "by 2."
        ]
    }
    assert QuotaRequest.objects.get(pk=request.pk).state == "pending"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "2000-01-01"}, "start"),
        ({"start": "tomorrow"}, "start"),
        ({"start": "9999-12-31"}, "start"),
        ({"end": "9999-12-31"}, "end"),
        ({"end": "2000-01-01"}, "end"),
        ({"gpu_model": "NVIDIA-B200"}, "gpu_model"),
        ({"gpu_resource": "amd.com/gpu"}, "gpu_resource"),
        ({"pending": "perhaps"}, "pending"),
    ],
)
def test_bad_calendar_input_is_400_naming_the_field(api, lead, cluster, models, params, field):
    response = api.as_user(lead).get(CALENDAR, params)

    assert response.status_code == 400
    assert list(response.data) == [field]


def test_a_calendar_longer_than_a_year_is_400_on_end(api, lead, cluster, today):
    response = api.as_user(lead).get(CALENDAR, {"end": str(today + days(400))})

    assert response.status_code == 400
    assert "At most 366 days" in response.data["end"][0]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"gpus": 0, "days": 3}, "gpus"),
        ({"gpus": "many", "days": 3}, "gpus"),
        ({"days": 3}, "gpus"),
        ({"gpus": 2, "days": 0}, "days"),
        ({"gpus": 2, "days": 400}, "days"),
        ({"gpus": 2, "days": 3, "not_before": "2000-01-01"}, "not_before"),
        ({"gpus": 2, "days": 3, "not_before": "9999-12-31"}, "not_before"),
        ({"gpus": 2, "days": 3, "gpu_model": "NVIDIA-B200"}, "gpu_model"),
    ],
)
def test_bad_window_input_is_400_naming_the_field(api, lead, cluster, models, params, field):
    response = api.as_user(lead).get(WINDOW, params)

    assert response.status_code == 400
    assert list(response.data) == [field]


def test_booking_a_window_in_the_past_or_ending_before_it_starts_is_400(
    api, lead, cluster, models, today
):
    response = api.as_user(lead).post(
        "/api/v1/quota-requests/",
        {
            "team": "vision",
            "cluster": "gpu-east",
            "gpu_model": A100,
            "gpus": 2,
            "starts_on": str(today - days(1)),
            "ends_on": str(today - days(3)),
            "justification": "Training.",
        },
    )

    assert response.status_code == 400
    assert set(response.data) == {"starts_on", "ends_on"}


def test_an_unknown_cluster_is_404(api, lead):
    assert api.as_user(lead).get("/api/v1/clusters/nowhere/calendar/").status_code == 404


def test_anonymous_callers_are_refused(api, cluster):
    assert api.get(CALENDAR).status_code in (401, 403)


def test_the_schema_documents_both_endpoints(api, lead):
    schema = api.as_user(lead).get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()

    calendar = schema["paths"]["/api/v1/clusters/{name}/calendar/"]["get"]
    window = schema["paths"]["/api/v1/clusters/{name}/earliest-window/"]["get"]
    assert {p["name"] for p in calendar["parameters"]} >= {"name", "gpu_model", "start", "end"}
    assert {p["name"] for p in window["parameters"]} >= {"gpus", "days", "not_before"}
    assert "400" in calendar["responses"]
    assert "200" in window["responses"]
