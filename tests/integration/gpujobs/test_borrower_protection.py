"""Borrowers protected for a minimum run time, and told before they stop, end to end on the
devcluster with Kueue, the real worker and the real watcher:

* a borrower within the cluster's minimum run time is not preempted while its lender's job
  waits within the bound; once the time is up the portal lowers its priority, Kueue preempts
  it, its owner is told (a webhook a real receiver takes, a notification) and its pod is
  deleted with the cluster's grace period: it stops when the grace is up, not before (the
  devcluster stops it as a kubelet stops containers that ignore SIGTERM), and the job page
  shows when it was warned and when it stopped;
* a lender that has waited past the bound takes its GPUs back from a borrower still within
  its minimum run time.

The periodic task's work (``borrower_protection.end_protection``) is called as beat would call
it, every second."""

import datetime
import time

import pytest
from django.test import Client
from django.utils import timezone

from clusters.vocabulary import KUEUE_PRIORITY_CLASS_LABEL
from gpujobs import borrower_protection
from gpujobs.models import GpuJob
from monitoring.models import Notification
from tenants import queueing
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import api_client_for, submit, wait_for_job, wait_for_state
from tests.integration.gpujobs.kueue import A100, H100
from tests.integration.webhooks.conftest import receiver  # noqa: F401 (a fixture)
from webhooks.models import Delivery
from webhooks.sending import delivery_send
from workloads.pod_states import Reason

pytestmark = [pytest.mark.devcluster]

State = GpuJob.State
# The devcluster deletes this pod when its termination grace period is up (kwok-stages.yaml).
STOPS_AFTER_GRACE = {"devcluster.gpuportal.io/use-termination-grace": "true"}
MIN_RUNTIME = 15
GRACE = 6


def submitted(response) -> GpuJob:
    assert response.status_code == 201, response.content
    return GpuJob.objects.get(pk=response.json()["id"])


def check_protection(cluster) -> list[str]:
    """What beat's task does for the cluster, with the cluster's row as it is now."""
    cluster.refresh_from_db()
    return borrower_protection.end_protection(cluster)


def borrow_and_lend(make_kueue_team, cluster):
    """A lender of one idle A100 and a borrower running on it; then the lender's own job."""
    lender = make_kueue_team({A100: 1}, name="lender")
    borrower = make_kueue_team({H100: 1}, name="borrower")
    borrowing = submitted(
        submit(borrower.member, borrower.team, cluster, name="borrow", gpu_model=A100,
               priority="opportunistic", annotations=STOPS_AFTER_GRACE)
    )  # fmt: skip
    borrowing = wait_for_state(borrowing.pk, State.RUNNING, timeout=60)
    return lender, borrower, borrowing


def test_a_borrower_runs_its_minimum_time_then_is_warned_and_stopped_after_the_grace(
    make_kueue_team,
    running_services,
    batch,
    core,
    kueue_cluster,
    receiver,  # noqa: F811
):
    cluster = queueing.cluster_set_borrowing(
        actor=kueue_cluster.admin,
        cluster=kueue_cluster.cluster,
        borrower_min_runtime_seconds=MIN_RUNTIME,
        lender_wait_bound_seconds=600,
        preemption_grace_seconds=GRACE,
    )
    lender, borrower, borrowing = borrow_and_lend(make_kueue_team, cluster)
    kube = batch.read_namespaced_job(borrowing.kube_name, borrowing.team.slug)
    assert kube.metadata.labels[KUEUE_PRIORITY_CLASS_LABEL] == "gpu-portal-opportunistic-protected"
    assert kube.spec.template.spec.termination_grace_period_seconds == GRACE
    hook = factories.WebhookFactory(
        team=borrower.team, url=receiver.url, events=["gpu_job.preempted"]
    )

    mine = submitted(submit(lender.member, lender.team, cluster, name="mine", gpu_model=A100))
    # Within the minimum run time, the lender's job waits and the borrower keeps running.
    while (timezone.now() - borrowing.started_at).total_seconds() < MIN_RUNTIME - 6:
        assert check_protection(cluster) == []
        time.sleep(1)
    assert GpuJob.objects.get(pk=mine.pk).state == State.PENDING
    assert GpuJob.objects.get(pk=borrowing.pk).state == State.RUNNING
    assert GpuJob.objects.get(pk=borrowing.pk).preemptions == 0

    # Once it is up, the portal lowers the borrower's priority and Kueue preempts it.
    def lowered():
        return check_protection(cluster) or None

    (name,) = wait_for(lowered, timeout=30, interval=1, what="the protection ended")
    assert name == f"{borrowing.team.slug}/{borrowing.kube_name}"
    preempted = wait_for_job(
        borrowing.pk, lambda j: j.preempted_at is not None, timeout=30, what="the preemption"
    )
    assert preempted.preempted_at - preempted.started_at >= datetime.timedelta(
        seconds=MIN_RUNTIME - 1
    )
    # Warned: its pod is terminating (SIGTERM) with the cluster's grace, and still there.
    (pod_name,) = preempted.pods
    pod = core.read_namespaced_pod(pod_name, borrowing.team.slug)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == GRACE
    assert GpuJob.objects.get(pk=mine.pk).state == State.PENDING  # the GPU is not free yet
    # The owner hears of it while the pod has its grace: a webhook, a notification.
    delivery = wait_for(
        lambda: Delivery.objects.filter(webhook=hook, event="gpu_job.preempted").first(),
        what="the preemption notice",
    )
    later = timezone.now() + datetime.timedelta(hours=1)  # due whatever the worker tried
    wait_for(lambda: delivery_send(delivery_id=delivery.pk, now=later), what="the notice sent")
    (got,) = receiver.wait_for(1)
    assert got.json["event"] == "gpu_job.preempted"
    assert (got.json["data"]["job_id"], got.json["data"]["grace_seconds"]) == (borrowing.pk, GRACE)
    notice = Notification.objects.get(user=borrower.member, kind="job_preempted")
    assert f"have {GRACE} seconds to save their work" in notice.body

    # Stopped when the grace is up (SIGKILL), and only then does the lender's job run.
    stopped = wait_for_job(
        borrowing.pk, lambda j: j.preemption_stopped_at is not None, timeout=30,
        what="the borrower's pods stopped",
    )  # fmt: skip
    assert stopped.preemption_stopped_at - stopped.preempted_at >= datetime.timedelta(
        seconds=GRACE - 1
    )
    assert (stopped.state, stopped.reason) == (State.PENDING, Reason.PREEMPTED)
    wait_for_state(mine.pk, State.RUNNING, timeout=60)
    browser = Client()
    browser.force_login(borrower.member)
    page = browser.get(f"/jobs/{borrowing.pk}/").content.decode()
    assert "Warned (SIGTERM) at" in page
    assert "stopped at" in page
    detail = api_client_for(borrower.member).get(f"/api/v1/jobs/{borrowing.pk}/").json()
    assert detail["preemption_stopped_at"] is not None


def test_a_lender_waiting_past_the_bound_takes_its_gpus_back_from_a_protected_borrower(
    make_kueue_team, running_services, kueue_cluster
):
    cluster = queueing.cluster_set_borrowing(
        actor=kueue_cluster.admin,
        cluster=kueue_cluster.cluster,
        borrower_min_runtime_seconds=3600,
        lender_wait_bound_seconds=6,
        preemption_grace_seconds=0,
    )
    lender, _, borrowing = borrow_and_lend(make_kueue_team, cluster)

    mine = submitted(submit(lender.member, lender.team, cluster, name="mine", gpu_model=A100))
    mine = wait_for_job(mine.pk, lambda j: j.submitted_at is not None, what="the lender's job")
    while (timezone.now() - mine.submitted_at).total_seconds() < 4:
        assert check_protection(cluster) == []
        time.sleep(1)
    assert GpuJob.objects.get(pk=mine.pk).state == State.PENDING

    wait_for(lambda: check_protection(cluster) or None, timeout=30, interval=1,
             what="the protection ended by the bound")  # fmt: skip
    preempted = wait_for_job(
        borrowing.pk, lambda j: j.preempted_at is not None, timeout=30, what="the preemption"
    )
    assert preempted.preempted_at - mine.submitted_at >= datetime.timedelta(seconds=5)
    assert preempted.preempted_at - preempted.started_at < datetime.timedelta(seconds=3600)
    wait_for_state(mine.pk, State.RUNNING, timeout=60)
