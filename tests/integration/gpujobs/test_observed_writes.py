"""Writing what the cluster shows when another writer moved the job's state between the read and
the write: the submit task marking it submitted does not swallow the news, a stop still wins;
and when the Job's end reaches the watcher before its pod's events, the pod's facts still do."""

import pytest
from django.utils import timezone

from gpujobs.models import GpuJob
from gpujobs.observe import Observation
from gpujobs.recording import OBSERVED_FIELDS, record_observation
from gpujobs.tracker import Tracker
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


def test_a_jobs_end_seen_before_its_pod_still_records_the_pods_node_and_exit_code(job):
    """The watcher follows Jobs and pods on separate streams: either may come first."""
    tracker = Tracker(cluster_id=job.cluster_id, cluster_name="gpu")
    labels = {"app.kubernetes.io/managed-by": "gpu-portal", "gpuportal.io/job-id": str(job.pk)}
    meta = {"namespace": job.team.slug, "labels": labels}
    tracker.state.apply(
        "Job",
        "MODIFIED",
        {
            "kind": "Job",
            "metadata": {**meta, "name": f"gpujob-{job.pk}", "uid": "uid-1"},
            "spec": {"backoffLimit": 0},
            "status": {
                "succeeded": 1,
                "completionTime": "2026-03-10T10:05:00Z",
                "conditions": [{"type": "Complete", "status": "True"}],
            },
        },
    )
    key = (job.team.slug, job.pk)

    assert tracker.write_many([key]) == 1
    job.refresh_from_db()
    assert (job.state, job.node, job.exit_code) == ("succeeded", "", None)

    finished = {"startedAt": "2026-03-10T10:00:00Z", "exitCode": 0}
    tracker.state.apply(
        "Pod",
        "MODIFIED",
        {
            "kind": "Pod",
            "metadata": {
                **meta,
                "name": f"gpujob-{job.pk}-abcde",
                "creationTimestamp": "2026-03-10T09:59:58Z",
                "ownerReferences": [{"kind": "Job", "controller": True, "uid": "uid-1"}],
            },
            "spec": {"nodeName": "gpu-node-3"},
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [{"name": "main", "state": {"terminated": finished}}],
            },
        },
    )

    assert tracker.write_many([key]) == 1
    job.refresh_from_db()
    assert (job.state, job.node, job.exit_code) == ("succeeded", "gpu-node-3", 0)
    assert job.pods == [f"gpujob-{job.pk}-abcde"]
    assert job.started_at.isoformat() == "2026-03-10T10:00:00+00:00"
    assert tracker.write_many([key]) == 0  # nothing new the second time
