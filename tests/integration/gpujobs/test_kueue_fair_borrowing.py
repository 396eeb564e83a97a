"""Borrowers sharing idle GPUs by weight, end to end on the devcluster with Kueue, the real
worker and the real watcher: on a cluster whose admin turned ``borrowers_share_by_weight`` on,
two teams of weights 1 and 3 borrowing a lender's 8 idle A100s end up holding them 2 and 6
(within one GPU), though the first took them all before the second asked; the first team's
jobs are preempted and requeued, not lost."""

import pytest

from gpujobs.models import GpuJob
from tenants import queueing
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import submit
from tests.integration.gpujobs.kueue import A100, H100
from workloads.pod_states import Reason

pytestmark = [pytest.mark.devcluster]

State = GpuJob.State
JOBS_EACH = 10


def running(team) -> int:
    return GpuJob.objects.filter(team=team, state=State.RUNNING).count()


def test_two_borrowers_of_weights_1_and_3_hold_idle_gpus_in_that_proportion(
    make_kueue_team, running_services, kueue_cluster
):
    cluster = queueing.cluster_set_borrowing(
        actor=kueue_cluster.admin, cluster=kueue_cluster.cluster, borrowers_share_by_weight=True
    )
    make_kueue_team({A100: 8}, name="lender")  # idle: lends all 8
    one = make_kueue_team({H100: 1}, name="weight-one", fair_sharing_weight="1")
    three = make_kueue_team({H100: 1}, name="weight-three", fair_sharing_weight="3")

    for gpu in (one, three):
        for index in range(JOBS_EACH):
            response = submit(
                gpu.member, gpu.team, cluster, name=f"borrow-{index}", gpus=1,
                gpu_model=A100, priority="opportunistic",
            )  # fmt: skip
            assert response.status_code == 201, response.content
        if gpu is one:
            # The first comes first: it borrows all 8 before the second asks.
            wait_for(lambda: running(one.team) == 8, timeout=90, what="8 borrowed by weight one")

    # Weight three preempts weight one's borrowed GPUs until the shares (borrowed / weight)
    # are even: 2 and 6.
    wait_for(
        lambda: (
            abs(running(one.team) - 2) <= 1
            and abs(running(three.team) - 6) <= 1
            and running(one.team) + running(three.team) == 8
        ),
        timeout=120,
        what="the borrowed A100s shared 2 to 6",
    )
    preempted = GpuJob.objects.filter(team=one.team, reason=Reason.PREEMPTED)
    assert preempted.count() >= 5
    assert not GpuJob.objects.filter(team=three.team, preemptions__gt=0).exists()
    assert all(job.state == State.PENDING for job in preempted)  # requeued, not lost
