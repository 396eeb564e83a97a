"""GPU jobs on the devcluster, end to end: the API stores the job, a real Celery worker creates
the Job, the scheduler places its pod, kwok runs it, and the watcher brings the outcome back."""

import pytest
from django.test import Client

from gpujobs.models import GpuJob
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import (
    api_client_for,
    finishing,
    gpu_nodes,
    job_pods,
    read_or_none,
    submit,
    wait_for_finish,
    wait_for_job,
    wait_for_state,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture(autouse=True)
def _services(running_services):
    """Every test here needs the worker and the watcher."""


def test_one_gpu_job_lands_on_a_gpu_node_runs_and_succeeds(make_gpu_team, gpu_cluster, core):
    gpu = make_gpu_team(gpus=1)

    response = submit(
        gpu.member,
        gpu.team,
        gpu_cluster,
        name="train",
        gpus=1,
        command=["python", "train.py"],
        annotations=finishing(3),
    )
    assert response.status_code == 201, response.data
    job_id = response.data["id"]
    job = wait_for_finish(job_id, "succeeded")

    assert job.node in gpu_nodes(core)  # never a CPU node
    node = core.read_node(job.node)
    assert node.metadata.labels["hardware-type"] == "gpu"
    assert job.exit_code == 0
    assert job.started_at is not None
    assert job.finished_at is not None
    assert job.finished_at >= job.started_at
    assert job.submitted_at is not None
    assert job.message == "Finished successfully."


def test_portal_shows_node_times_and_exit_code(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(1)).data["id"]
    job = wait_for_finish(job_id, "succeeded")
    client = Client()
    client.force_login(gpu.member)

    api = client.get(f"/api/v1/jobs/{job_id}/").json()
    page = client.get(f"/jobs/{job_id}/").content.decode()

    assert api["state"] == "succeeded"
    assert api["node"] == job.node
    assert api["exit_code"] == 0
    assert api["started_at"]
    assert api["finished_at"]
    assert f'<dd data-testid="job-node">{job.node}</dd>' in page
    assert '<dd data-testid="job-exit-code">0</dd>' in page
    assert job.started_at.strftime("%Y-%m-%d %H:%M:%S") in page


def test_failing_job_shows_failed_with_its_exit_code(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)

    job_id = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(1, exit_code=3)).data[
        "id"
    ]
    job = wait_for_finish(job_id, "failed")

    assert job.exit_code == 3
    assert job.reason == "BackoffLimitExceeded"
    assert job.message == "The container exited with code 3."
    assert job.node.startswith("gpu-node-")
    assert job.finished_at is not None


def test_job_past_its_maximum_run_time_fails_with_deadline_exceeded(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)

    job_id = submit(gpu.member, gpu.team, gpu_cluster, max_runtime_seconds=3).data["id"]
    job = wait_for_state(job_id, "failed")

    assert job.reason == "DeadlineExceeded"
    assert job.message == "Deadline exceeded: stopped after its maximum run time of 3 s."


def test_stopping_a_running_job_removes_its_pods_and_shows_cancelled(
    make_gpu_team, gpu_cluster, core, batch
):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, name="forever").data["id"]
    job = wait_for_state(job_id, "running")
    assert len(job_pods(core, job)) == 1

    response = api_client_for(gpu.member).post(f"/api/v1/jobs/{job_id}/cancel/")

    assert response.status_code == 200, response.data
    assert response.data["state"] == "cancelled"
    assert response.data["cancelled_by"] == gpu.member.username
    wait_for(lambda: not job_pods(core, job), timeout=60, what="the job's pods to be removed")
    wait_for(
        lambda: read_or_none(batch.read_namespaced_job, job.kube_name, job.team.slug) is None,
        timeout=60,
        what="the Job to be deleted",
    )
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert job.finished_at is not None
    assert job.message == f"Stopped by {gpu.member.username}."


def test_stopping_a_finished_job_is_a_conflict(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(1)).data["id"]
    wait_for_state(job_id, "succeeded")

    response = api_client_for(gpu.lead).post(f"/api/v1/jobs/{job_id}/cancel/")

    assert response.status_code == 409
    assert response.data["state"] == ["succeeded"]


@pytest.mark.parametrize("mode", ["before", "beside"])
def test_preprocessing_container_runs_without_gpus(make_gpu_team, gpu_cluster, core, mode):
    gpu = make_gpu_team(gpus=1)

    job_id = submit(
        gpu.member,
        gpu.team,
        gpu_cluster,
        gpus=1,
        annotations=finishing(2),
        preprocess={
            "image": "registry.example.com/ml/text-cleaner:2",
            "mode": mode,
            "command": ["clean", "--in", "/data"],
            "cpu_cores": "1",
            "memory_gib": "0.5",
        },
    ).data["id"]
    job = wait_for_state(job_id, "running", "succeeded")

    (pod,) = job_pods(core, job)
    containers = {c.name: c for c in [*(pod.spec.init_containers or []), *pod.spec.containers]}
    assert set(containers) == {"main", "preprocess"}
    assert (pod.spec.init_containers is not None) == (mode == "before")
    assert containers["main"].resources.limits["nvidia.com/gpu"] == "1"
    assert "nvidia.com/gpu" not in (containers["preprocess"].resources.limits or {})
    assert containers["preprocess"].resources.limits == {"cpu": "1", "memory": "512Mi"}
    wait_for_state(job_id, "succeeded")


def test_job_asks_for_the_chosen_gpu_model(make_gpu_team, gpu_cluster, batch):
    gpu = make_gpu_team(gpus=1)

    job_id = submit(
        gpu.member,
        gpu.team,
        gpu_cluster,
        gpu_model="NVIDIA-A100-SXM4-80GB",
        annotations=finishing(1),
    ).data["id"]
    job = wait_for_state(job_id, "succeeded")

    kube_job = batch.read_namespaced_job(job.kube_name, job.team.slug)
    terms = kube_job.spec.template.spec.affinity.node_affinity
    (term,) = terms.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert {(e.key, tuple(e.values)) for e in term.match_expressions} == {
        ("hardware-type", ("gpu",)),
        ("nvidia.com/gpu.product", ("NVIDIA-A100-SXM4-80GB",)),
    }


def test_job_page_follows_the_state_live(make_gpu_team, gpu_cluster):
    """The live panel (what htmx polls) moves on without reloading the page."""
    gpu = make_gpu_team(gpus=1)
    client = Client()
    client.force_login(gpu.member)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(2)).data["id"]

    first = client.get(f"/jobs/{job_id}/live/", HTTP_HX_REQUEST="true").content.decode()
    wait_for_state(job_id, "succeeded")
    last = client.get(f"/jobs/{job_id}/live/", HTTP_HX_REQUEST="true").content.decode()

    assert 'hx-trigger="every 2s"' in first  # still polling while it runs
    assert "Succeeded" in last
    assert "hx-trigger" not in last  # polling stops once the job ended


def test_watcher_records_the_jobs_pods(make_gpu_team, gpu_cluster, core):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(1)).data["id"]

    job = wait_for_job(job_id, lambda j: j.state == "succeeded" and j.pods, what="its pods")

    assert job.pods == [p.metadata.name for p in job_pods(core, job)]
    assert GpuJob.objects.get(pk=job_id).kube_uid


def test_a_batch_of_jobs_all_run_and_succeed(make_gpu_team, gpu_cluster, core):
    gpu = make_gpu_team(gpus=3)
    jobs = [
        {
            "name": f"sweep-{i}",
            "image": "registry.example.com/ml/trainer:1.0",
            "args": ["--seed", str(i)],
            "gpus": 1,
            "annotations": finishing(1),
        }
        for i in range(3)
    ]

    response = api_client_for(gpu.member).post(
        "/api/v1/jobs/batch/",
        {"team": gpu.team.slug, "cluster": gpu_cluster.name, "jobs": jobs},
    )

    assert response.status_code == 201, response.data
    done = [wait_for_state(job["id"], "succeeded") for job in response.data["jobs"]]
    assert [job.name for job in done] == ["sweep-0", "sweep-1", "sweep-2"]
    for job in done:
        (pod,) = job_pods(core, job)
        assert pod.spec.node_name in gpu_nodes(core)  # never a CPU node
        assert pod.spec.containers[0].args == ["--seed", job.name.removeprefix("sweep-")]
