"""Team B does not see team A's jobs: every way of reaching one by id, through the API or the
pages, is a 404 (never a 403 that confirms it exists), and nothing changes on the cluster."""

import pytest
from django.test import Client

from tests.integration.gpujobs.fixtures import (
    api_client_for,
    job_pods,
    submit,
    wait_for_state,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

API_REACHES = [
    ("get", "/api/v1/jobs/{id}/"),
    ("post", "/api/v1/jobs/{id}/cancel/"),
    ("get", "/api/v1/jobs/{id}/logs/"),
    ("get", "/api/v1/jobs/{id}/logs/?follow=true"),
    ("get", "/api/v1/jobs/{id}/events/"),
]
PAGE_REACHES = [
    ("get", "/jobs/{id}/"),
    ("get", "/jobs/{id}/live/"),
    ("get", "/jobs/{id}/logs/"),
    ("get", "/jobs/{id}/events/"),
    ("get", "/jobs/{id}/gpus/"),
    ("post", "/jobs/{id}/cancel/"),
]


@pytest.fixture
def team_a_running_job(running_services, make_gpu_team, gpu_cluster):
    team_a = make_gpu_team(gpus=1, name="a")
    job_id = submit(team_a.member, team_a.team, gpu_cluster, name="secret-sauce").data["id"]
    job = wait_for_state(job_id, "running")
    yield team_a, job
    api_client_for(team_a.member).post(f"/api/v1/jobs/{job_id}/cancel/")


def test_members_of_team_b_cannot_see_stop_or_read_logs_of_team_as_job(
    team_a_running_job, make_gpu_team, core
):
    team_a, job = team_a_running_job
    team_b = make_gpu_team(gpus=1, name="b")

    for user in (team_b.lead, team_b.member, team_b.viewer):
        api = api_client_for(user)
        for method, path in API_REACHES:
            response = getattr(api, method)(path.format(id=job.pk))
            assert response.status_code == 404, (user.username, method, path)
        listed = api.get("/api/v1/jobs/").data
        assert listed["count"] == 0
        assert api.get(f"/api/v1/jobs/?team={team_a.team.slug}").data["count"] == 0

        page = Client()
        page.force_login(user)
        for method, path in PAGE_REACHES:
            response = getattr(page, method)(path.format(id=job.pk))
            assert response.status_code == 404, (user.username, method, path)
        jobs_page = page.get("/jobs/").content.decode()
        assert "secret-sauce" not in jobs_page

    job.refresh_from_db()
    assert job.state == "running"
    assert len(job_pods(core, job)) == 1


def test_team_b_cannot_submit_into_team_a(team_a_running_job, make_gpu_team, gpu_cluster):
    team_a, _ = team_a_running_job
    team_b = make_gpu_team(gpus=1, name="b")

    response = submit(team_b.lead, team_a.team, gpu_cluster)

    assert response.status_code == 400
    assert "team" in response.data  # not a team they can see


def test_viewer_of_team_a_sees_the_job_but_cannot_stop_it(team_a_running_job):
    team_a, job = team_a_running_job
    api = api_client_for(team_a.viewer)

    assert api.get(f"/api/v1/jobs/{job.pk}/").status_code == 200
    response = api.post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert response.status_code == 403
    job.refresh_from_db()
    assert job.state == "running"


def test_viewer_cannot_submit(make_gpu_team, gpu_cluster):
    team = make_gpu_team(gpus=1)

    response = submit(team.viewer, team.team, gpu_cluster)

    assert response.status_code == 403
    assert "Only leads and members" in response.data["detail"]
