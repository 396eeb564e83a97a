"""Writing what the cluster shows when another writer moved the job's state between the read and
the write: the submit task marking it submitted does not swallow the news, a stop still wins."""

import pytest
from django.utils import timezone

from gpujobs.models import GpuJob
from gpujobs.observe import Observation
from gpujobs.recording import OBSERVED_FIELDS, record_observation
from tests import factories

pytestmark = [pytest.mark.integration]

RUNNING = Observation(state="running", node="gpu-node-0", pods=("gpujob-1-abcde",))


@pytest.fixture
def job(db, postgres_database):
    team = factories.TeamFactory()
    return GpuJob.objects.create(
        team=team,
        cluster=factories.ClusterFactory(),
        submitted_by=factories.UserFactory(),
        name="race",
        image="registry.example.com/ml/trainer:1",
        gpus=1,
        max_runtime_seconds=600,
    )


def read(job) -> dict:
    return GpuJob.objects.filter(pk=job.pk).values(*OBSERVED_FIELDS).get()


def test_a_submission_written_after_the_read_does_not_swallow_the_running_pod(job):
    stale = read(job)  # the watcher reads the row while it is still queued ...
    GpuJob.objects.filter(pk=job.pk).update(state="submitted", submitted_at=timezone.now())
    # ... and the submit task marks it submitted before the watcher writes.

    assert record_observation(stale, RUNNING, kube_uid="uid-1", now=timezone.now()) == 1

    job.refresh_from_db()
    assert (job.state, job.node, job.pods) == ("running", "gpu-node-0", ["gpujob-1-abcde"])


def test_a_stop_written_after_the_read_still_wins(job):
    stale = read(job)
    GpuJob.objects.filter(pk=job.pk).update(state="cancelled", finished_at=timezone.now())

    assert record_observation(stale, RUNNING, kube_uid="uid-1", now=timezone.now()) == 0

    job.refresh_from_db()
    assert job.state == "cancelled"
