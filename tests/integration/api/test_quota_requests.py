"""Asking for quota: who may, what is checked, and who sees which requests."""

import datetime

import pytest

from tenants.models import AuditEvent, QuotaRequest
from tests import factories

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"


@pytest.fixture
def body(today):
    """A request a lead of team A may make: every test changes one thing."""
    return {
        "team": "vision",
        "cluster": "gpu-east",
        "gpu_resource": "nvidia.com/gpu",
        "gpus": 4,
        "starts_on": today.isoformat(),
        "ends_on": (today + datetime.timedelta(days=30)).isoformat(),
        "justification": "Fine-tuning the support model.",
    }


def ids(response):
    return [row["id"] for row in response.data["results"]]


# --- creating ----------------------------------------------------------------------------------


def test_lead_requests_quota_for_their_team(api, lead, cluster, body):
    response = api.as_user(lead).post(URL, body)

    assert response.status_code == 201
    assert response.data["state"] == "pending"
    assert response.data["team"] == "vision"
    assert response.data["cluster"] == "gpu-east"
    assert response.data["requested_by"] == "lena-lead"
    quota_request = QuotaRequest.objects.get(pk=response.data["id"])
    assert quota_request.gpus == 4


def test_creating_a_request_is_audited(api, lead, cluster, body):
    response = api.as_user(lead).post(URL, body)

    event = AuditEvent.objects.get(action="quota_request.created")
    assert event.target_id == response.data["id"]
    assert event.before is None
    assert event.after["gpus"] == 4


def test_request_without_dates_starts_today_and_is_open_ended(api, lead, cluster, body, today):
    del body["starts_on"], body["ends_on"]

    response = api.as_user(lead).post(URL, body)

    assert response.status_code == 201
    assert response.data["starts_on"] == today.isoformat()
    assert response.data["ends_on"] is None


def test_request_with_optional_cpu_and_memory(api, lead, cluster, body):
    response = api.as_user(lead).post(URL, {**body, "cpu_cores": "12.5", "memory_gib": 256})

    assert response.status_code == 201
    assert response.data["cpu_cores"] == "12.50"
    assert response.data["memory_gib"] == 256


def test_admin_may_request_on_a_teams_behalf(api, admin, team, cluster, body):
    response = api.as_user(admin).post(URL, body)

    assert response.status_code == 201


@pytest.mark.parametrize("user_fixture", ["member", "viewer"])
def test_member_or_viewer_cannot_request_quota(api, request, cluster, body, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).post(URL, body)

    assert response.status_code == 403
    assert response.data["detail"] == "Only leads of vision can request quota for it."
    assert not QuotaRequest.objects.exists()


def test_lead_of_another_team_cannot_request_for_a_team_they_cannot_see(
    api, other_lead, team, cluster, body
):
    response = api.as_user(other_lead).post(URL, body)

    assert response.status_code == 400
    assert response.data == {"team": ["No team with slug 'vision'."]}


def test_outsider_requesting_for_an_existing_team_hears_it_does_not_exist(
    api, outsider, team, cluster, body
):
    response = api.as_user(outsider).post(URL, body)

    assert response.data == {"team": ["No team with slug 'vision'."]}


def test_unknown_cluster_is_400_naming_cluster(api, lead, cluster, body):
    response = api.as_user(lead).post(URL, {**body, "cluster": "x"})

    assert response.status_code == 400
    assert response.data == {"cluster": ["No cluster named 'x'."]}


def test_unknown_gpu_resource_is_400_naming_the_kinds_on_offer(api, lead, cluster, body):
    response = api.as_user(lead).post(URL, {**body, "gpu_resource": "amd.com/gpu"})

    assert response.status_code == 400
    assert response.data == {
        "gpu_resource": [
            "Cluster gpu-east has no GPUs of kind 'amd.com/gpu'; it offers: nvidia.com/gpu."
        ]
    }


@pytest.mark.parametrize("gpus", [0, -1, -100], ids=["zero", "minus-one", "minus-hundred"])
def test_zero_or_negative_gpus_is_400_on_gpus(api, lead, cluster, body, gpus):
    response = api.as_user(lead).post(URL, {**body, "gpus": gpus})

    assert response.status_code == 400
    assert list(response.data) == ["gpus"]


@pytest.mark.parametrize(
    "gpus",
    [2.5, "four", "", None, True, [4]],
    ids=["fraction", "word", "empty", "null", "boolean", "list"],
)
def test_non_integer_gpus_is_400_on_gpus(api, lead, cluster, body, gpus):
    response = api.as_user(lead).post(URL, {**body, "gpus": gpus})

    assert response.status_code == 400
    assert list(response.data) == ["gpus"]


def test_more_gpus_than_anyone_may_ask_for_is_400_on_gpus(api, lead, cluster, body, settings):
    too_many = settings.PORTAL_MAX_GPUS_PER_REQUEST + 1

    response = api.as_user(lead).post(URL, {**body, "gpus": too_many})

    assert response.status_code == 400
    assert response.data["gpus"] == [
        f"At most {too_many - 1} GPUs can be requested at once; {too_many} were asked for."
    ]


@pytest.mark.postgres  # the point is PostgreSQL's integer range, narrower than SQLite's
def test_absurdly_large_gpu_count_is_400_not_a_database_error(api, lead, cluster, body):
    response = api.as_user(lead).post(URL, {**body, "gpus": 10**30})

    assert response.status_code == 400
    assert list(response.data) == ["gpus"]


def test_end_before_start_is_400_on_ends_on(api, lead, cluster, body, today):
    ends = (today - datetime.timedelta(days=1)).isoformat()

    response = api.as_user(lead).post(
        URL, {**body, "starts_on": today.isoformat(), "ends_on": ends}
    )

    assert response.status_code == 400
    assert response.data == {"ends_on": [f"Must not be before the start date ({today})."]}


def test_start_in_the_past_is_400_on_starts_on(api, lead, cluster, body, today):
    yesterday = today - datetime.timedelta(days=1)

    response = api.as_user(lead).post(URL, {**body, "starts_on": yesterday.isoformat()})

    assert response.status_code == 400
    assert list(response.data) == ["starts_on"]
    assert "past" in response.data["starts_on"][0]


@pytest.mark.parametrize("field", ["starts_on", "ends_on"])
def test_malformed_date_is_400_naming_the_field(api, lead, cluster, body, field):
    response = api.as_user(lead).post(URL, {**body, field: "2026-13-45"})

    assert response.status_code == 400
    assert list(response.data) == [field]


@pytest.mark.parametrize("justification", ["", "   \n"], ids=["empty", "whitespace"])
def test_empty_justification_is_400_on_justification(api, lead, cluster, body, justification):
    response = api.as_user(lead).post(URL, {**body, "justification": justification})

    assert response.status_code == 400
    assert response.data == {"justification": ["Say what the GPUs are for."]}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cpu_cores", "-1"),
        ("cpu_cores", "100000.01"),
        ("cpu_cores", "many"),
        ("memory_gib", -4),
        ("memory_gib", 10**10),
        ("memory_gib", "lots"),
    ],
)
def test_bad_cpu_or_memory_is_400_naming_the_field(api, lead, cluster, body, field, value):
    response = api.as_user(lead).post(URL, {**body, field: value})

    assert response.status_code == 400
    assert list(response.data) == [field]


def test_missing_required_fields_are_each_named(api, lead, cluster):
    response = api.as_user(lead).post(URL, {})

    assert response.status_code == 400
    assert set(response.data) == {"team", "cluster", "gpus", "justification"}


def test_several_bad_fields_are_reported_together(api, lead, cluster, body, today):
    response = api.as_user(lead).post(
        URL,
        {
            **body,
            "gpu_resource": "amd.com/gpu",
            "ends_on": (today - datetime.timedelta(days=1)).isoformat(),
        },
    )

    assert set(response.data) == {"gpu_resource", "ends_on"}


def test_a_past_start_and_a_bad_gpu_count_are_reported_together(api, lead, cluster, body, today):
    response = api.as_user(lead).post(
        URL,
        {
            **body,
            "gpus": 5000,
            "starts_on": (today - datetime.timedelta(days=3)).isoformat(),
            "justification": "   ",
        },
    )

    assert response.status_code == 400
    assert set(response.data) == {"gpus", "starts_on", "justification"}


# --- reading -----------------------------------------------------------------------------------


def test_lead_lists_only_their_teams_requests(api, lead, pending_request, other_pending_request):
    response = api.as_user(lead).get(URL)

    assert response.status_code == 200
    assert ids(response) == [pending_request.pk]


def test_viewer_reads_their_teams_request(api, viewer, pending_request):
    response = api.as_user(viewer).get(f"{URL}{pending_request.pk}/")

    assert response.status_code == 200
    assert response.data["justification"] == "Fine-tuning the support model."


def test_lead_of_another_team_gets_404_for_a_request_by_id(api, other_lead, pending_request):
    response = api.as_user(other_lead).get(f"{URL}{pending_request.pk}/")

    assert response.status_code == 404


def test_outsider_lists_no_requests(api, outsider, pending_request):
    response = api.as_user(outsider).get(URL)

    assert response.data["count"] == 0


def test_admin_lists_every_teams_requests(api, admin, pending_request, other_pending_request):
    response = api.as_user(admin).get(URL)

    assert set(ids(response)) == {pending_request.pk, other_pending_request.pk}


# --- filters, ordering, pagination -------------------------------------------------------------


@pytest.fixture
def assorted_requests(team, other_team, cluster, lead, other_lead):
    """Requests that differ in team, cluster, state and GPU kind."""
    west = factories.ClusterFactory(name="gpu-west")
    factories.GpuCapacityFactory(cluster=west, resource_name="nvidia.com/mig-1g.10gb")
    make = factories.QuotaRequestFactory
    return {
        "a-east": make(team=team, cluster=cluster, requested_by=lead),
        "a-west-mig": make(
            team=team, cluster=west, requested_by=lead, gpu_resource="nvidia.com/mig-1g.10gb"
        ),
        "a-rejected": make(team=team, cluster=cluster, requested_by=lead, state="rejected"),
        "b-east": make(team=other_team, cluster=cluster, requested_by=other_lead),
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("team=vision", {"a-east", "a-west-mig", "a-rejected"}),
        ("team=speech", {"b-east"}),
        ("cluster=gpu-west", {"a-west-mig"}),
        ("state=rejected", {"a-rejected"}),
        ("gpu_resource=nvidia.com/mig-1g.10gb", {"a-west-mig"}),
        ("team=vision&cluster=gpu-east&state=pending", {"a-east"}),
    ],
)
def test_admin_filters_requests(api, admin, assorted_requests, query, expected):
    response = api.as_user(admin).get(f"{URL}?{query}")

    assert response.status_code == 200
    assert set(ids(response)) == {assorted_requests[name].pk for name in expected}


def test_filtering_by_another_teams_slug_shows_nothing_to_a_lead(api, lead, assorted_requests):
    response = api.as_user(lead).get(f"{URL}?team=speech")

    assert response.data["count"] == 0


def test_unknown_state_filter_is_400_on_state(api, lead):
    response = api.as_user(lead).get(f"{URL}?state=lost")

    assert response.status_code == 400
    assert list(response.data) == ["state"]


def test_requests_are_newest_first_and_can_be_ordered_oldest_first(api, lead, team, cluster):
    requests = factories.QuotaRequestFactory.create_batch(
        3, team=team, cluster=cluster, requested_by=lead
    )
    made = [r.pk for r in requests]

    newest_first = api.as_user(lead).get(URL)
    oldest_first = api.get(f"{URL}?ordering=created_at")

    assert ids(newest_first) == made[::-1]
    assert ids(oldest_first) == made


def test_requests_are_paginated_fifty_to_a_page(api, lead, team, cluster):
    factories.QuotaRequestFactory.create_batch(60, team=team, cluster=cluster, requested_by=lead)

    first = api.as_user(lead).get(URL)
    second = api.get(first.data["next"])

    assert first.data["count"] == 60
    assert len(first.data["results"]) == 50
    assert len(second.data["results"]) == 10
    assert second.data["next"] is None
    assert not set(ids(first)) & set(ids(second))


def test_page_size_can_be_chosen(api, lead, team, cluster):
    factories.QuotaRequestFactory.create_batch(5, team=team, cluster=cluster, requested_by=lead)

    response = api.as_user(lead).get(f"{URL}?page_size=2&page=3")

    assert len(response.data["results"]) == 1


def test_page_past_the_end_is_404(api, lead, pending_request):
    response = api.as_user(lead).get(f"{URL}?page=9")

    assert response.status_code == 404
