"""A cluster switched between quota only and Kueue with jobs in flight loses and duplicates no
job, both ways: what runs keeps running untouched, what waits is made again under the new mode
(once), and new jobs follow the cluster's mode. With Kueue stopped, a new job waits in the portal
and says Kueue is not admitting, a waiting job stays suspended, and once Kueue is back each of
them runs in its turn. The devcluster's Kueue, the real worker and the real watcher."""

import time

import pytest

from clusters.models import QuotaMode
from gpujobs.models import GpuJob
from tenants.reconcile_triggers import enqueue_cluster_reconcile_now, enqueue_reconcile_now
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import (
    api_client_for,
    submit,
    wait_for_job,
    wait_for_state,
)
from tests.integration.gpujobs.kueue import A100
from tests.integration.reconcile.conftest import route_reconciles
from workloads.pod_states import Reason

pytestmark = [pytest.mark.devcluster]

State = GpuJob.State
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def submitted(response) -> GpuJob:
    assert response.status_code == 201, response.content
    return GpuJob.objects.get(pk=response.json()["id"])


def jobs_on_cluster(batch, namespace) -> dict[str, object]:
    return {j.metadata.name: j for j in batch.list_namespaced_job(namespace).items}


def test_switching_to_kueue_queues_the_waiting_job_and_leaves_the_running_one_alone(
    make_gpu_team, kueue_cluster, running_services, batch, core, monkeypatch
):
    cluster = kueue_cluster.set_mode(QuotaMode.QUOTA_ONLY)
    team = make_gpu_team(gpus=3, quota=2)  # the cluster lets 2 of its 3 GPUs run
    running = submitted(submit(team.member, team.team, cluster, name="runs", gpus=2))
    running = wait_for_state(running.pk, State.RUNNING, timeout=60)
    waiting = submitted(submit(team.member, team.team, cluster, name="waits", gpus=1))
    waiting = wait_for_job(
        waiting.pk,
        lambda j: j.reason == Reason.EXCEEDED_QUOTA,
        timeout=60,
        what="the second job refused by the ResourceQuota",
    )
    assert waiting.queue_name == ""

    # The switch's reconcile is held back (its tasks go to a queue no worker reads), so the
    # ResourceQuota stays as it was and the waiting job cannot start outside Kueue meanwhile.
    route_reconciles(monkeypatch, f"held-{team.namespace}")
    kueue_cluster.set_mode(QuotaMode.KUEUE)
    moved = wait_for_job(
        waiting.pk,
        lambda j: j.queue_name == "guaranteed" and j.kube_uid not in ("", waiting.kube_uid),
        timeout=60,
        what="the waiting job made again in the team's guaranteed queue",
    )
    assert moved.state in (State.SUBMITTED, State.PENDING)
    monkeypatch.undo()
    enqueue_cluster_reconcile_now(cluster_id=cluster.pk)
    enqueue_reconcile_now(team_id=team.team.pk, cluster_id=cluster.pk)
    wait_for_state(moved.pk, State.RUNNING, timeout=90)

    on_cluster = jobs_on_cluster(batch, team.namespace)
    assert set(on_cluster) == {running.kube_name, waiting.kube_name}
    assert on_cluster[running.kube_name].metadata.uid == running.kube_uid  # untouched
    assert QUEUE_LABEL not in (on_cluster[running.kube_name].metadata.labels or {})
    assert on_cluster[waiting.kube_name].metadata.labels[QUEUE_LABEL] == "guaranteed"
    running.refresh_from_db()
    assert running.state == State.RUNNING
    new = submitted(submit(team.member, team.team, cluster, name="new", gpus=1))
    assert new.queue_name == "guaranteed"


def test_switching_to_quota_only_releases_the_waiting_job_and_leaves_the_admitted_one_alone(
    make_kueue_team, kueue_cluster, running_services, batch, core
):
    cluster = kueue_cluster.cluster
    team = make_kueue_team({A100: 2}, name="switching")
    admitted = submitted(
        submit(team.member, team.team, cluster, name="admitted", gpus=2, gpu_model=A100)
    )
    admitted = wait_for_state(admitted.pk, State.RUNNING, timeout=60)
    waiting = submitted(
        submit(team.member, team.team, cluster, name="waits", gpus=1, gpu_model=A100)
    )
    waiting = wait_for_job(
        waiting.pk,
        lambda j: j.reason == Reason.IN_QUEUE,
        timeout=60,
        what="the second job waiting in the queue",
    )
    assert jobs_on_cluster(batch, team.namespace)[waiting.kube_name].spec.suspend is True

    # The reconcile takes the team's queues away and lowers its ResourceQuota to the grants.
    kueue_cluster.set_mode(QuotaMode.QUOTA_ONLY)

    released = wait_for_job(
        waiting.pk,
        lambda j: j.queue_name == "" and j.kube_uid not in ("", waiting.kube_uid),
        timeout=60,
        what="the waiting job made again without a queue",
    )
    released = wait_for_job(
        released.pk,
        lambda j: j.reason == Reason.EXCEEDED_QUOTA,
        timeout=60,
        what="the released job waiting for the ResourceQuota",
    )
    on_cluster = jobs_on_cluster(batch, team.namespace)
    assert set(on_cluster) == {admitted.kube_name, waiting.kube_name}
    assert on_cluster[admitted.kube_name].metadata.uid == admitted.kube_uid
    assert not on_cluster[waiting.kube_name].spec.suspend
    admitted.refresh_from_db()
    assert admitted.state == State.RUNNING

    # Once the admitted job is stopped, the released one runs under the ResourceQuota.
    api_client_for(team.member).post(f"/api/v1/jobs/{admitted.pk}/cancel/")
    wait_for_state(released.pk, State.RUNNING, timeout=90)
    assert GpuJob.objects.filter(team=team.team).count() == 2
    assert len(jobs_on_cluster(batch, team.namespace)) <= 2


def test_while_kueue_is_down_jobs_wait_and_say_so_and_nothing_is_lost_once_it_is_back(
    make_kueue_team, kueue_cluster, running_services, batch, devcluster, client_as
):
    cluster = kueue_cluster.cluster
    team = make_kueue_team({A100: 1}, name="outage")
    holder = submitted(
        submit(team.member, team.team, cluster, name="holder", gpus=1, gpu_model=A100)
    )
    holder = wait_for_state(holder.pk, State.RUNNING, timeout=60)
    waiting = submitted(
        submit(team.member, team.team, cluster, name="waiting", gpus=1, gpu_model=A100)
    )
    waiting = wait_for_job(
        waiting.pk,
        lambda j: j.reason == Reason.IN_QUEUE,
        timeout=60,
        what="the second job waiting in the queue",
    )
    not_admitting = f"Kueue on cluster {cluster.name} is not admitting"

    with devcluster.kueue_stopped():
        new = submitted(submit(team.member, team.team, cluster, name="new", gpus=1, gpu_model=A100))
        new = wait_for_job(
            new.pk,
            lambda j: j.reason == Reason.KUEUE_NOT_ADMITTING,
            timeout=30,
            what="the new job refused by Kueue's webhook",
        )
        assert new.state == State.QUEUED
        assert new.message.startswith(not_admitting)
        page = client_as(team.member)
        wait_for(
            lambda: not_admitting in page.get(f"/jobs/{waiting.pk}/").content.decode(),
            timeout=30,
            what="the waiting job's page saying Kueue is not admitting",
        )
        assert not_admitting in page.get(f"/jobs/{new.pk}/").content.decode()
        # Stopping the holder frees its GPU, but Kueue is not there to admit the next job.
        api_client_for(team.member).post(f"/api/v1/jobs/{holder.pk}/cancel/")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert jobs_on_cluster(batch, team.namespace)[waiting.kube_name].spec.suspend is True
            time.sleep(0.5)

    # Kueue, restarted, gives the holder's freed GPU to one of the two: usually the older
    # waiting job, but not always. Seen in CI: Kueue 0.17, at start, tried the waiting job while
    # it still counted the holder and set it aside as inadmissible; the holder's Workload went
    # 50 ms later, and Kueue tries the jobs set aside again only after a batching second, by
    # which time the new job, created by the worker's retry, had taken the GPU at once. Either
    # way nothing is lost: one runs, the other waits in the queue.
    def one_running_one_in_queue():
        pair = {j.pk: j for j in GpuJob.objects.filter(pk__in=[waiting.pk, new.pk])}
        states = sorted((j.state, j.reason) for j in pair.values())
        if states == [(State.PENDING, Reason.IN_QUEUE), (State.RUNNING, "")]:
            return pair
        return None

    # Kueue first rebuilds its cache from every Workload and Job on the cluster: on a loaded
    # 2-core machine that took over 60 s.
    pair = wait_for(
        one_running_one_in_queue,
        timeout=180,
        what="one of the waiting and the new job running, the other waiting in the queue",
    )
    wait_for(
        lambda: holder.kube_name not in jobs_on_cluster(batch, team.namespace),
        timeout=60,
        what="the stopped holder's Job gone (Kueue removes its finalizer)",
    )
    on_cluster = jobs_on_cluster(batch, team.namespace)
    assert set(on_cluster) == {waiting.kube_name, new.kube_name}
    assert on_cluster[waiting.kube_name].metadata.uid == waiting.kube_uid
    assert on_cluster[new.kube_name].metadata.uid == pair[new.pk].kube_uid
    assert pair[new.pk].submit_attempts >= 2

    # Once the one running is stopped, Kueue admits the other.
    running = next(j for j in pair.values() if j.state == State.RUNNING)
    queued = next(j for j in pair.values() if j.state == State.PENDING)
    api_client_for(team.member).post(f"/api/v1/jobs/{running.pk}/cancel/")
    wait_for_state(queued.pk, State.RUNNING, timeout=90)
    assert GpuJob.objects.filter(team=team.team).count() == 3
