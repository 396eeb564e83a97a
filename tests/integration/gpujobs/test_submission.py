"""A job is created on the cluster once, whatever happens to the worker: creating twice finds the
first Job, a redelivered task does nothing new, a queued job whose message was lost is picked up
by the periodic resync, a stop during creation wins, and the resync repairs what the watcher
missed."""

import datetime
import uuid

import pytest
from django.utils import timezone

from clusters.workloads import WorkloadClient
from gpujobs import cluster_jobs, enqueue, manifests, services, tasks
from gpujobs.models import GpuJob
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import (
    api_client_for,
    read_or_none,
    submit,
    wait_for_job,
    wait_for_state,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


def queued_job(gpu, cluster, **kwargs) -> GpuJob:
    """A job row as ``job_submit`` stores it, without enqueueing anything."""
    kwargs.setdefault("name", "direct")
    return GpuJob.objects.create(
        team=gpu.team,
        cluster=cluster,
        submitted_by=gpu.member,
        image="registry.example.com/ml/trainer:1",
        gpus=1,
        max_runtime_seconds=600,
        **kwargs,
    )


def kube_jobs(batch, namespace):
    return batch.list_namespaced_job(namespace).items


def test_creating_twice_makes_one_job(make_gpu_team, gpu_cluster, batch):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster)

    first = cluster_jobs.job_create_on_cluster(job_id=job.pk)
    second = cluster_jobs.job_create_on_cluster(job_id=job.pk)

    # The watcher (running for other tests) may see the new Job before the row is marked.
    assert first in ("created", "created (the watcher saw it first)")
    assert second == "not queued, or another worker holds it"
    (kube_job,) = kube_jobs(batch, gpu.namespace)
    job.refresh_from_db()
    assert job.state in ("submitted", "pending", "running")
    assert job.kube_uid == kube_job.metadata.uid
    assert job.submit_attempts == 1


def test_worker_that_died_after_creating_is_followed_by_one_that_finds_the_job(
    make_gpu_team, gpu_cluster, batch
):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster)
    # The first worker created the Job and died before recording it; its claim has expired.
    made = WorkloadClient.for_cluster(gpu_cluster).create_job(manifests.stored_job_manifest(job))[0]
    GpuJob.objects.filter(pk=job.pk).update(
        claimed_at=timezone.now() - datetime.timedelta(minutes=5), submit_attempts=1
    )

    outcome = cluster_jobs.job_create_on_cluster(job_id=job.pk)

    # Either this worker found the Job, or the watcher saw it first and moved the job on.
    assert outcome in (
        "found created by an earlier attempt",
        "created (the watcher saw it first)",
        "not queued, or another worker holds it",
    )
    job = wait_for_job(job.pk, lambda j: j.kube_uid, what="the Job's uid")
    assert job.kube_uid == made["metadata"]["uid"]
    assert job.state in ("submitted", "pending", "running")
    assert len(kube_jobs(batch, gpu.namespace)) == 1


def test_a_claimed_job_is_left_to_the_worker_holding_it(make_gpu_team, gpu_cluster, batch):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster, claimed_at=timezone.now())

    assert cluster_jobs.job_create_on_cluster(job_id=job.pk).startswith("not queued")
    assert kube_jobs(batch, gpu.namespace) == []


def test_submit_task_delivered_twice_creates_one_job(
    running_services, make_gpu_team, gpu_cluster, batch
):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster)

    tasks.submit_job.delay(job_id=job.pk)
    tasks.submit_job.delay(job_id=job.pk)
    wait_for_state(job.pk, "running")

    assert len(kube_jobs(batch, gpu.namespace)) == 1
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job.pk}/cancel/")


def test_a_share_of_a_batch_delivered_twice_creates_each_job_once(
    running_services, make_gpu_team, gpu_cluster, batch
):
    gpu = make_gpu_team(gpus=3)
    jobs = [queued_job(gpu, gpu_cluster, name=f"share-{i}") for i in range(3)]
    job_ids = [job.pk for job in jobs]

    tasks.submit_jobs.delay(job_ids=job_ids)
    tasks.submit_jobs.delay(job_ids=job_ids)
    for job_id in job_ids:
        wait_for_state(job_id, "running", "succeeded")

    made = kube_jobs(batch, gpu.namespace)
    assert sorted(j.metadata.name for j in made) == sorted(
        manifests.job_name(job_id) for job_id in job_ids
    )
    for job_id in job_ids:
        api_client_for(gpu.member).post(f"/api/v1/jobs/{job_id}/cancel/")


def test_queued_job_whose_message_was_lost_is_created_by_the_periodic_resync(
    running_services, make_gpu_team, gpu_cluster, batch
):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster)  # stored, but its task never reached a worker
    GpuJob.objects.filter(pk=job.pk).update(
        created_at=timezone.now() - datetime.timedelta(minutes=2)
    )

    tasks.resync_jobs.delay()
    job = wait_for_state(job.pk, "running")

    assert len(kube_jobs(batch, gpu.namespace)) == 1
    assert job.submit_attempts == 1
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job.pk}/cancel/")


def test_recent_queued_job_is_not_resubmitted_by_the_resync(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster)

    assert job.pk not in enqueue.requeue_stuck_jobs()


def test_stop_during_creation_wins(make_gpu_team, gpu_cluster, batch):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster)

    class StoppedWhileCreating(WorkloadClient):
        def create_job(self, manifest):
            created = super().create_job(manifest)
            services.job_cancel(actor=gpu.member, job=GpuJob.objects.get(pk=job.pk))
            return created

    kube = StoppedWhileCreating.for_cluster(gpu_cluster)
    outcome = cluster_jobs.job_create_on_cluster(job_id=job.pk, kube=kube)

    assert outcome == "cancelled meanwhile; deleted again"
    wait_for(
        lambda: read_or_none(batch.read_namespaced_job, job.kube_name, gpu.namespace) is None,
        timeout=60,
        what="the Job to be deleted",
    )
    job.refresh_from_db()
    assert job.state == "cancelled"


def test_job_stopped_before_a_worker_took_it_never_reaches_the_cluster(
    make_gpu_team, gpu_cluster, batch
):
    gpu = make_gpu_team(gpus=1)
    job = queued_job(gpu, gpu_cluster)
    services.job_cancel(actor=gpu.lead, job=job)

    assert cluster_jobs.job_create_on_cluster(job_id=job.pk).startswith("not queued")
    assert kube_jobs(batch, gpu.namespace) == []


def test_periodic_resync_repairs_a_state_the_watcher_missed(
    running_services, make_gpu_team, gpu_cluster
):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster).data["id"]
    wait_for_state(job_id, "running")
    # As if the watch event that moved it on had been lost:
    GpuJob.objects.filter(pk=job_id).update(state="submitted", node="")

    result = tasks.resync_jobs.apply().get()

    assert result["clusters"][gpu_cluster.name]["changed"] >= 1
    job = GpuJob.objects.get(pk=job_id)
    assert job.state == "running"
    assert job.node.startswith("gpu-node-")
    api_client_for(gpu.member).post(f"/api/v1/jobs/{job_id}/cancel/")


def test_job_deleted_outside_the_portal_shows_failed(
    running_services, make_gpu_team, gpu_cluster, batch
):
    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster).data["id"]
    job = wait_for_state(job_id, "running")

    batch.delete_namespaced_job(job.kube_name, gpu.namespace, propagation_policy="Background")
    job = wait_for_job(job_id, lambda j: j.state == "failed", what="the deletion to be seen")

    assert job.reason == "JobDeleted"
    assert job.message == "The Job was deleted from the cluster outside the portal."


def test_job_stopped_by_the_idle_gpu_policy_shows_cancelled_with_why(
    running_services, make_gpu_team, gpu_cluster
):
    from clusters import pods
    from monitoring.models import IdlePod

    gpu = make_gpu_team(gpus=1)
    job_id = submit(gpu.member, gpu.team, gpu_cluster).data["id"]
    job = wait_for_job(job_id, lambda j: j.state == "running" and j.pods, what="its pod")
    (pod,) = job.pods
    now = timezone.now()
    # What monitoring's idle check records, and then does, when a team's policy stops a pod.
    IdlePod.objects.create(
        cluster=gpu_cluster,
        team=gpu.team,
        namespace=gpu.namespace,
        pod=pod,
        gpus=1,
        average_utilisation=2.0,
        first_idle_at=now,
        last_idle_at=now,
        stopped_at=now,
    )
    pods.stop_managed_pod(gpu_cluster, namespace=gpu.namespace, pod=pod)

    job = wait_for_job(job_id, lambda j: j.is_final, what="the stop to be seen")

    assert job.state == "cancelled"
    assert job.reason == "IdleStopped"
    assert job.message == "Stopped by the idle-GPU policy: its GPUs averaged 2% utilisation."


def test_a_job_waits_for_its_teams_namespace_and_runs_once_the_reconcile_made_it(
    make_gpu_team, gpu_cluster, core
):
    gpu = make_gpu_team(gpus=1)
    core.delete_namespace(gpu.namespace)  # as if the cluster had been rebuilt since the grant
    wait_for(
        lambda: read_or_none(core.read_namespace, gpu.namespace) is None,
        timeout=120,
        what=f"namespace {gpu.namespace} to be gone",
    )

    job_id = submit(gpu.member, gpu.team, gpu_cluster, name="early").data["id"]

    job = wait_for_state(job_id, "running", timeout=180)
    assert job.node.startswith("gpu-node-")
    assert read_or_none(core.read_namespace, gpu.namespace) is not None


def test_a_job_of_a_team_without_quota_on_the_cluster_fails_saying_so(make_gpu_team, gpu_cluster):
    gpu = make_gpu_team(gpus=1)
    ungranted = factories.TeamFactory(slug=f"nq-{uuid.uuid4().hex[:6]}")
    job = GpuJob.objects.create(
        team=ungranted,
        cluster=gpu_cluster,
        submitted_by=gpu.member,
        name="nowhere",
        image="registry.example.com/ml/trainer:1",
        gpus=1,
        max_runtime_seconds=600,
    )

    assert cluster_jobs.job_create_on_cluster(job_id=job.pk).startswith("failed")

    job.refresh_from_db()
    assert job.state == "failed"
    assert f"Team {ungranted.slug} has no namespace on cluster devcluster (no active quota" in (
        job.message
    )
