"""A job holds its GPUs against the team's quota until it ends, and gives them back when it does:
stopped through the API, or finished or failed as the watcher records it. Read from the quota
the portal checks (``quota_left``) and from what the next submission may ask for. The jobs never
reach a cluster here (nothing is enqueued: the test's transaction never commits);
tests/integration/gpujobs/test_quota.py runs the same on the devcluster."""

import datetime

import pytest
from django.utils import timezone

from gpujobs.models import GpuJob
from gpujobs.observe import Observation
from gpujobs.recording import record_observations
from tests import factories
from workloads.quota import quota_left

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"


@pytest.fixture
def two_gpus(team, cluster, lead, admin):
    today = timezone.localdate()
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=2,
        request__starts_on=today,
        request__ends_on=today + datetime.timedelta(days=30),
        granted_by=admin,
    )


def submit(api, user, gpus, name="trainer"):
    body = {
        "team": "vision",
        "cluster": "gpu-east",
        "name": name,
        "image": "registry.example.com/ml/trainer:1.0",
        "gpus": gpus,
    }
    return api.as_user(user).post("/api/v1/jobs/", body)


def left(team, cluster) -> tuple[int, int]:
    quota = quota_left(team=team, cluster=cluster, gpu_resource=GPU)
    return quota.held, quota.left


def watcher_sees(job_id, cluster, namespace, state, **fields):
    """What the watcher records when the cluster shows the job in ``state``."""
    observation = Observation(state=state, pods=(f"gpujob-{job_id}-x",), **fields)
    changed = record_observations(
        cluster_id=cluster.pk, seen=[(namespace, job_id, observation, "")]
    )
    assert changed == 1


@pytest.fixture
def running_job(api, member, team, cluster, two_gpus):
    response = submit(api, member, 2)
    assert response.status_code == 201, response.data
    job_id = response.data["id"]
    watcher_sees(job_id, cluster, team.slug, "running", node="gpu-node-0")
    assert left(team, cluster) == (2, 0)
    assert submit(api, member, 1, name="one-more").status_code == 400
    return job_id


def test_a_stopped_job_gives_its_gpus_back(api, member, team, cluster, running_job):
    response = api.as_user(member).post(f"/api/v1/jobs/{running_job}/cancel/")

    assert response.status_code == 200
    assert GpuJob.objects.get(pk=running_job).state == GpuJob.State.CANCELLED
    assert left(team, cluster) == (0, 2)
    assert submit(api, member, 2, name="next").status_code == 201


@pytest.mark.parametrize(
    ("state", "exit_code"), [("succeeded", 0), ("failed", 1)], ids=["succeeded", "failed"]
)
def test_a_job_that_ends_on_the_cluster_gives_its_gpus_back(
    api, member, team, cluster, running_job, state, exit_code
):
    watcher_sees(running_job, cluster, team.slug, state, exit_code=exit_code)

    assert GpuJob.objects.get(pk=running_job).state == state
    assert left(team, cluster) == (0, 2)
    assert submit(api, member, 2, name="next").status_code == 201


def test_a_job_still_waiting_for_a_node_keeps_holding_its_gpus(
    api, member, team, cluster, two_gpus
):
    job_id = submit(api, member, 2).data["id"]

    watcher_sees(job_id, cluster, team.slug, "pending", reason="Unschedulable")

    assert left(team, cluster) == (2, 0)
