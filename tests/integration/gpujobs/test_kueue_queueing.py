"""GPU jobs on a Kueue cluster, end to end on the devcluster with Kueue, the real worker and the
real watcher: idle GPUs are borrowed and taken back, each GPU model's quota admits its own jobs,
a shrunk or expired grant lowers the queue without stopping what runs, and a waiting job says
why it waits, where it stands and when it may start."""

import datetime
import time

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.vocabulary import resource_flavor_name
from gpujobs.models import GpuJob
from tenants import quota as tenant_quota
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import (
    api_client_for,
    submit,
    wait_for_job,
    wait_for_state,
)
from tests.integration.gpujobs.kueue import A100, H100
from webhooks.models import Delivery
from workloads.pod_states import Reason

pytestmark = [pytest.mark.devcluster]

State = GpuJob.State


def kube_job(batch, job):
    return batch.read_namespaced_job(job.kube_name, job.team.slug)


def submitted(response) -> GpuJob:
    assert response.status_code == 201, response.content
    return GpuJob.objects.get(pk=response.json()["id"])


def test_an_opportunistic_job_borrows_idle_gpus_and_gives_them_back_when_the_lender_needs_them(
    make_kueue_team, running_services, batch, kueue_cluster
):
    cluster = kueue_cluster.cluster
    lender = make_kueue_team({A100: 4}, name="lender")
    borrower = make_kueue_team({H100: 1}, name="borrower")

    # The lender is idle: the borrower's opportunistic jobs run on its A100s.
    borrowing = [
        submitted(submit(borrower.member, borrower.team, cluster, name=f"borrow-{i}", gpus=2,
                         gpu_model=A100, priority="opportunistic"))
        for i in range(2)
    ]  # fmt: skip
    for job in borrowing:
        job = wait_for_state(job.pk, State.RUNNING, timeout=60)
        assert job.queue_name == "opportunistic"
        assert job.admitted_at is not None

    # The borrower's owner hears of a preemption at once (its pods get SIGTERM, then the
    # termination grace period, to checkpoint).
    hook = factories.WebhookFactory(team=borrower.team, events=["gpu_job.preempted"])

    # The lender wants its GPUs back.
    started = time.monotonic()
    guaranteed = submitted(
        submit(lender.member, lender.team, cluster, name="mine", gpus=4, gpu_model=A100)
    )
    guaranteed = wait_for_state(guaranteed.pk, State.RUNNING, timeout=60)
    took_running = time.monotonic() - started
    preempted = [
        wait_for_job(job.pk, lambda j: j.reason == Reason.PREEMPTED, timeout=30,
                     what="the borrower's job preempted")
        for job in borrowing
    ]  # fmt: skip
    took_preempted = time.monotonic() - started
    print(f"lender running after {took_running:.1f}s; borrowers preempted by {took_preempted:.1f}s")

    for job in preempted:
        assert job.state == State.PENDING
        assert job.preemptions == 1
        assert job.preempted_by == f"job #{guaranteed.pk} of team {lender.team.slug} (guaranteed)"
        assert job.message.startswith(f"Preempted by job #{guaranteed.pk}")
        assert kube_job(batch, job).spec.suspend is True  # requeued, not lost
    assert guaranteed.queue_name == "guaranteed"
    assert took_running < 20, f"the lender waited {took_running:.1f}s for its GPUs"
    notices = wait_for(
        lambda: list(Delivery.objects.filter(webhook=hook, event="gpu_job.preempted")) or None,
        what="the preemption notices",
    )
    assert sorted(d.payload["data"]["job_id"] for d in notices) == sorted(j.pk for j in borrowing)
    assert {d.payload["data"]["preempted_by"] for d in notices} == {
        f"job #{guaranteed.pk} of team {lender.team.slug} (guaranteed)"
    }


def queue_status(user, job) -> dict:
    response = api_client_for(user).get(f"/api/v1/jobs/{job.pk}/")
    assert response.status_code == 200
    return response.json()


def wait_for_queue_status(user, job, predicate, *, timeout=30, what="the queue status"):
    def check():
        data = queue_status(user, job)
        return data if data["queue_status"] and predicate(data["queue_status"]) else None

    return wait_for(check, timeout=timeout, interval=0.5, what=what)


def test_a_job_beyond_the_free_quota_waits_and_says_why_where_it_stands_and_when_it_may_start(
    make_kueue_team, running_services, kueue_cluster
):
    cluster = kueue_cluster.cluster
    team = make_kueue_team({A100: 2}, name="vision", borrowing_limit=2)
    make_kueue_team({A100: 3}, name="idle")  # lends its 3 idle A100s
    running = submitted(
        submit(
            team.member,
            team.team,
            cluster,
            name="running",
            gpus=2,
            gpu_model=A100,
            max_runtime_seconds=1200,
        )
    )
    running = wait_for_state(running.pk, State.RUNNING, timeout=60)
    borrowed = submitted(
        submit(
            team.member,
            team.team,
            cluster,
            name="borrowed",
            gpus=1,
            gpu_model=A100,
            priority="opportunistic",
        )
    )
    wait_for_state(borrowed.pk, State.RUNNING, timeout=60)

    guaranteed = submitted(
        submit(team.member, team.team, cluster, name="next", gpus=2, gpu_model=A100)
    )
    opportunistic = submitted(
        submit(
            team.member,
            team.team,
            cluster,
            name="borrow",
            gpus=2,
            gpu_model=A100,
            priority="opportunistic",
        )
    )

    waiting = wait_for_queue_status(
        team.viewer,
        guaranteed,
        lambda q: q["position_in_team_queue"] == 1,
        what="the guaranteed job's place in its queue",
    )
    status = waiting["queue_status"]
    assert (waiting["state"], waiting["reason"]) == (State.PENDING, Reason.IN_QUEUE)
    assert status["why"] == (
        f"Team {team.team.slug}'s guaranteed jobs use 2 of its 2 {A100}; this job needs 2 and 0 "
        "are free. Guaranteed jobs run only within the team's own quota."
    )
    assert (status["position_in_team_queue"], status["position_in_cluster"]) == (1, 1)
    assert (status["figures"]["own"], status["figures"]["free_now"]) == (2, 0)
    ends = running.admitted_at + datetime.timedelta(seconds=1200)
    assert status["estimated_start"] == ends.isoformat().replace("+00:00", "Z")

    borrowing = wait_for_queue_status(
        team.viewer,
        opportunistic,
        lambda q: q["position_in_cluster"] == 2,
        what="the opportunistic job behind the guaranteed one in the cluster",
    )["queue_status"]
    assert borrowing["why"] == (
        f"Team {team.team.slug} uses 3 of its 2 {A100}; 2 {A100} are idle in the cohort but "
        f"{team.team.slug} may borrow 1 more (its borrowing limit is 2); this job needs 2."
    )
    assert borrowing["figures"]["idle_in_cohort"] == 2
    assert borrowing["figures"]["may_borrow"] == 1
    assert borrowing["position_in_team_queue"] == 1

    queue = api_client_for(team.viewer).get(
        f"/api/v1/teams/{team.team.slug}/queue/", {"cluster": cluster.name}
    )
    assert queue.status_code == 200
    body = queue.json()
    assert [j["id"] for j in body["admitted"]] == [running.pk, borrowed.pk]
    assert [j["id"] for j in body["waiting"]] == [guaranteed.pk, opportunistic.pk]
    (a100,) = body["gpus"]
    assert (a100["gpu_model"], a100["own"], a100["in_use"], a100["borrowed"]) == (A100, 2, 3, 1)
    assert body["borrowed"] == 1


def test_a_grant_of_one_model_admits_its_jobs_while_a_job_of_another_waits_with_the_reason(
    make_kueue_team, running_services, kueue_cluster, core
):
    cluster = kueue_cluster.cluster
    team = make_kueue_team({A100: 2, H100: 1}, name="models")
    h100 = submitted(submit(team.member, team.team, cluster, name="h100", gpus=1, gpu_model=H100))
    h100 = wait_for_state(h100.pk, State.RUNNING, timeout=60)

    waits = submitted(
        submit(team.member, team.team, cluster, name="h100-more", gpus=1, gpu_model=H100)
    )
    a100 = submitted(submit(team.member, team.team, cluster, name="a100", gpus=2, gpu_model=A100))

    a100 = wait_for_state(a100.pk, State.RUNNING, timeout=60)
    assert core.read_node(a100.node).metadata.labels["nvidia.com/gpu.product"] == A100
    assert core.read_node(h100.node).metadata.labels["nvidia.com/gpu.product"] == H100
    why = (
        f"Team {team.team.slug}'s guaranteed jobs use 1 of its 1 {H100}; this job needs 1 and 0 "
        "are free."
    )
    status = wait_for_queue_status(team.member, waits, lambda q: q["why"].startswith(why))
    assert status["state"] == State.PENDING
    assert "insufficient unused quota" in status["message"]


def test_a_shrunk_or_expired_grant_lowers_the_queue_without_stopping_running_jobs(
    make_kueue_team, running_services, kueue_cluster, batch
):
    cluster = kueue_cluster.cluster
    team = make_kueue_team({A100: 4}, name="shrinking")
    more = tenant_quota.quota_request_create(
        requested_by=team.lead,
        team=team.team,
        cluster=cluster,
        gpus=2,
        gpu_model=A100,
        justification="More.",
        ends_on=timezone.localdate(),
    )
    extra = tenant_quota.quota_request_approve(reviewer=kueue_cluster.admin, quota_request=more)
    flavor = resource_flavor_name(settings.PORTAL_NAME, A100)
    kueue_cluster.wait_for_own(team.team, {flavor: "6"})
    jobs = [
        submitted(submit(team.member, team.team, cluster, name=f"run-{i}", gpus=3,
                         gpu_model=A100))
        for i in range(2)
    ]  # fmt: skip
    jobs = [wait_for_state(j.pk, State.RUNNING, timeout=60) for j in jobs]
    uids = {j.pk: j.kube_uid for j in jobs}

    # Shrink the first grant from 4 to 2: 4 A100 left of 6, and 6 in use.
    tenant_quota.quota_grant_shrink(actor=kueue_cluster.admin, grant=team.grants[0], gpus=2)
    kueue_cluster.wait_for_own(team.team, {flavor: "4"})
    waits = submitted(
        submit(team.member, team.team, cluster, name="after-shrink", gpus=1, gpu_model=A100)
    )
    wait_for_queue_status(
        team.member,
        waits,
        lambda q: q["why"].startswith(f"Team {team.team.slug}'s guaranteed jobs use 6 of its 4"),
        what="the waiting job's reason after the shrink",
    )

    # The 2 more GPUs expire: 2 left, still 6 in use, and the queue grows no shorter.
    expired = tenant_quota.quota_grants_expire(
        today=timezone.localdate() + datetime.timedelta(days=1)
    )
    assert expired == [extra.pk]
    kueue_cluster.wait_for_own(team.team, {flavor: "2"})
    wait_for_queue_status(team.member, waits, lambda q: "use 6 of its 2" in q["why"])

    time.sleep(3)  # time for Kueue to evict anything it would
    for job in jobs:
        job.refresh_from_db()
        assert job.state == State.RUNNING
        assert job.preemptions == 0
        assert kube_job(batch, job).metadata.uid == uids[job.pk]
    waits.refresh_from_db()
    assert waits.state == State.PENDING
