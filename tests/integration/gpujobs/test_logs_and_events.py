"""Logs and events through the API and the job page. The API server's ``pods/log`` reaches
kwok, which serves each simulated container's log from a file the test writes (and appends to,
for a followed log); the job's events come from the cluster."""

import threading
import time

import pytest
from django.test import Client

from tests.integration.conftest import run_in_new_loop
from tests.integration.gpujobs.fixtures import (
    LOG_LINES,
    api_client_for,
    finishing,
    submit,
    wait_for_state,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


def streamed(response) -> bytes:
    """A followed log's whole body. It streams from an async iterator (served on the event loop
    under the ASGI worker); the test client hands that iterator over as it is."""

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return run_in_new_loop(read())


@pytest.fixture(autouse=True)
def _services(running_services):
    """Every test here needs the worker and the watcher."""


def test_last_lines_of_the_log_are_readable_through_the_api(running_job):
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


def test_log_as_plain_text(running_job):
    gpu, job = running_job

    response = api_client_for(gpu.member).get(
        f"/api/v1/jobs/{job.pk}/logs/?tail=1", HTTP_ACCEPT="text/plain"
    )

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == f"{job.pods[0]}/main line 50\n"


def test_log_is_followed_while_the_container_writes(running_job, devcluster, settings):
    gpu, job = running_job
    (pod,) = job.pods
    settings.GPUJOBS_LOG_FOLLOW_MAX_SECONDS = 3
    writing = threading.Event()

    def container_writes():
        for i in range(1, 41):
            if writing.is_set():
                return
            devcluster.write_pod_log(job.team.slug, pod, [f"{pod}/main followed {i}"])
            time.sleep(0.25)

    writer = threading.Thread(target=container_writes, daemon=True)
    writer.start()
    try:
        response = api_client_for(gpu.member).get(f"/api/v1/jobs/{job.pk}/logs/?tail=2&follow=true")
        assert response.status_code == 200
        assert response.streaming
        assert response["X-Pod"] == pod
        lines = streamed(response).decode().splitlines()
    finally:
        writing.set()
        writer.join()

    assert lines[-1] == "[the portal stopped following this log; ask again to go on]"
    # The tail as it was when the follow began, then every line written after, in order.
    written = [f"{pod}/main line {i}" for i in range(1, LOG_LINES + 1)] + [
        f"{pod}/main followed {i}" for i in range(1, 41)
    ]
    start = written.index(lines[0])
    assert lines[:-1] == written[start : start + len(lines) - 1]
    assert len(lines) - 1 > 2  # lines written while following came through


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
        team=gpu.team,
        cluster=gpu_cluster,
        submitted_by=gpu.member,
        name="waiting",
        image="registry.example.com/x:1",
        gpus=1,
        max_runtime_seconds=60,
    )

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
