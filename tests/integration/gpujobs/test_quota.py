"""Jobs are held to the team's GPU quota: the portal refuses what does not fit before anything
reaches the cluster, the API server's own quota check stays as the last line (and its refusal
reads the same way), and a job no node can fit waits with the scheduler's reason."""

import pytest

from gpujobs.models import GpuJob
from tests.integration.gpujobs.fixtures import (
    api_client_for,
    finishing,
    set_gpu_quota,
    submit,
    wait_for_job,
    wait_for_state,
)
from workloads.pod_states import QUOTA_USED_UP
from workloads.quota import quota_left

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture(autouse=True)
def _services(running_services):
    """Every test here needs the worker and the watcher."""


def test_job_over_the_teams_quota_is_refused_before_submission(make_gpu_team, gpu_cluster, batch):
    gpu = make_gpu_team(gpus=2)

    response = submit(gpu.member, gpu.team, gpu_cluster, gpus=3)

    assert response.status_code == 400
    (message,) = response.data["gpus"]
    assert message.startswith(QUOTA_USED_UP)
    assert "2 × nvidia.com/gpu" in message
    assert "so 2 left" in message
    assert "exceeding it by 1" in message
    assert not GpuJob.objects.exists()
    assert batch.list_namespaced_job(gpu.namespace).items == []


def test_gpus_held_by_unfinished_jobs_count_against_the_quota(make_gpu_team, gpu_cluster, batch):
    gpu = make_gpu_team(gpus=2)
    first = submit(gpu.member, gpu.team, gpu_cluster, gpus=2).data["id"]
    wait_for_state(first, "running")

    response = submit(gpu.lead, gpu.team, gpu_cluster, gpus=1)

    assert response.status_code == 400
    assert "2 held by its unfinished jobs, so 0 left" in response.data["gpus"][0]
    assert "exceeding it by 1" in response.data["gpus"][0]
    assert len(batch.list_namespaced_job(gpu.namespace).items) == 1
    api_client_for(gpu.member).post(f"/api/v1/jobs/{first}/cancel/")


def test_finished_jobs_give_their_gpus_back(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)
    first = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(1)).data["id"]
    wait_for_state(first, "succeeded")
    quota = quota_left(team=gpu.team, cluster=gpu_cluster, gpu_resource="nvidia.com/gpu")
    assert (quota.held, quota.left) == (0, 1)

    response = submit(gpu.member, gpu.team, gpu_cluster, annotations=finishing(1))

    assert response.status_code == 201, response.data


def test_team_without_quota_on_the_cluster_is_told_to_request_some(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=0)

    response = submit(gpu.member, gpu.team, gpu_cluster)

    assert response.status_code == 400
    assert "has no nvidia.com/gpu quota in effect" in response.data["gpus"][0]
    assert "A team lead can request quota" in response.data["gpus"][0]


def test_job_reaching_the_api_server_over_quota_shows_the_api_servers_reason(
    make_gpu_team, gpu_cluster, core
):
    # The grant still says 2 but the cluster's quota was shrunk to 1 meanwhile (an admin's
    # change not reconciled yet): the portal lets the job through, the API server does not.
    gpu = make_gpu_team(gpus=2, quota=1)

    response = submit(gpu.member, gpu.team, gpu_cluster, gpus=2)
    assert response.status_code == 201, response.data
    job = wait_for_job(
        response.data["id"], lambda j: j.reason == "ExceededQuota", what="the quota refusal"
    )

    assert job.state == "pending"
    assert job.message.startswith(f"{QUOTA_USED_UP}: the cluster refused the pod")
    assert "exceeded quota: gpu-portal-quota" in job.message
    assert "requested: requests.nvidia.com/gpu=2" in job.message
    assert "limited: requests.nvidia.com/gpu=1" in job.message
    detail = api_client_for(gpu.member).get(f"/api/v1/jobs/{job.pk}/").data
    assert detail["reason"] == "ExceededQuota"
    assert detail["message"] == job.message

    # Once the quota is back, the job controller retries and the job runs.
    set_gpu_quota(core, gpu.namespace, 2)
    wait_for_state(job.pk, "running", timeout=120)
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job.pk}/cancel/")


def test_job_needing_more_gpus_than_any_node_has_waits_with_the_schedulers_reason(
    make_gpu_team, gpu_cluster
):
    gpu = make_gpu_team(gpus=9)  # every devcluster GPU node has 8

    response = submit(gpu.member, gpu.team, gpu_cluster, gpus=9)
    assert response.status_code == 201, response.data
    job = wait_for_job(
        response.data["id"], lambda j: j.reason == "InsufficientGPUs", what="the scheduler"
    )

    assert job.state == "pending"
    assert job.message.startswith("No GPU node has enough free GPUs. The scheduler says: 0/")
    assert "Insufficient nvidia.com/gpu" in job.message
    assert job.node == ""
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job.pk}/cancel/")
