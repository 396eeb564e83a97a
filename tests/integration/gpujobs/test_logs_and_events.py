"""Logs and events through the API and the job page: the API server's ``pods/log`` reaches a
kubelet (the devcluster's simulated nodes serve none, so ``fake_kubelet`` plays one for the node
the job runs on), and the job's events come from the cluster."""

import pytest
from django.test import Client

from tests.integration.gpujobs.fixtures import (
    api_client_for,
    finishing,
    submit,
    wait_for_state,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture(autouse=True)
def _services(running_services):
    """Every test here needs the worker and the watcher."""


@pytest.fixture
def running_job(make_gpu_team, gpu_cluster, fake_kubelet):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, name="logs").data["id"]
    job = wait_for_state(job_id, "running")
    fake_kubelet.serve_logs_of(job.node)
    yield gpu, job
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job_id}/cancel/")


def test_last_lines_of_the_log_are_readable_through_the_api(running_job, fake_kubelet):
    gpu, job = running_job
    (pod,) = job.pods

    response = api_client_for(gpu.member).get(f"/api/v1/jobs/{job.pk}/logs/?tail=3")

    assert response.status_code == 200, response.data
    assert response.data["pod"] == pod
    assert response.data["container"] == "main"
    assert response.data["log"].splitlines() == [
        f"{pod}/main line 48",
        f"{pod}/main line 49",
        f"{pod}/main line 50",
    ]
    namespace, asked_pod, container, query = fake_kubelet.requests[-1]
    assert (namespace, asked_pod, container) == (job.team.slug, pod, "main")
    assert query["tailLines"] == ["3"]


def test_log_as_plain_text(running_job):
    gpu, job = running_job

    response = api_client_for(gpu.member).get(
        f"/api/v1/jobs/{job.pk}/logs/?tail=1", HTTP_ACCEPT="text/plain"
    )

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == f"{job.pods[0]}/main line 50\n"


def test_log_is_followed_while_the_container_writes(running_job):
    gpu, job = running_job
    (pod,) = job.pods

    response = api_client_for(gpu.member).get(f"/api/v1/jobs/{job.pk}/logs/?tail=2&follow=true")

    assert response.status_code == 200
    assert response.streaming
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines == [
        f"{pod}/main line 49",
        f"{pod}/main line 50",
        *(f"{pod}/main followed {i}" for i in range(1, 6)),
    ]
    assert response["X-Pod"] == pod


def test_job_page_shows_the_log(running_job):
    gpu, job = running_job
    client = Client()
    client.force_login(gpu.viewer)  # viewers may read logs

    fragment = client.get(f"/jobs/{job.pk}/logs/?tail=100").content.decode()

    assert f"{job.pods[0]}/main line 1\n" in fragment
    assert 'data-testid="job-log"' in fragment


def test_bad_tail_is_refused(running_job):
    gpu, job = running_job

    response = api_client_for(gpu.member).get(f"/api/v1/jobs/{job.pk}/logs/?tail=-1")

    assert response.status_code == 400
    assert "tail" in response.data


def test_queued_job_has_no_log_yet_and_says_why(make_gpu_team, gpu_cluster, settings):
    gpu = make_gpu_team(gpus=1)
    from gpujobs.models import GpuJob

    job = GpuJob.objects.create(
        team=gpu.team, cluster=gpu_cluster, submitted_by=gpu.member, name="waiting",
        image="registry.example.com/x:1", gpus=1, max_runtime_seconds=60,
    )  # fmt: skip

    response = api_client_for(gpu.member).get(f"/api/v1/jobs/{job.pk}/logs/")

    assert response.status_code == 200
    assert response.data["pod"] is None
    assert response.data["detail"] == "The job is queued: it has no pod yet."


def test_events_of_the_job_and_its_pod(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(1)).data["id"]
    wait_for_state(job_id, "succeeded")

    response = api_client_for(gpu.member).get(f"/api/v1/jobs/{job_id}/events/")

    assert response.status_code == 200
    reasons = {(e["object"].split("/")[0], e["reason"]) for e in response.data}
    assert ("Job", "SuccessfulCreate") in reasons
    assert ("Pod", "Scheduled") in reasons
    scheduled = next(e for e in response.data if e["reason"] == "Scheduled")
    assert "gpu-node-" in scheduled["message"]
