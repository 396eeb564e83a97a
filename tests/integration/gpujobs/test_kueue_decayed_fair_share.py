"""Usage-decayed fair sharing end to end on the devcluster with Kueue, the real worker and the
real watcher: two teams of equal weight each wait with one opportunistic A100 job while the
lender's only A100 is busy; the first to ask has used many GPU-hours lately (its backfilled
history of finished jobs), the second none. With a half-life set on the cluster the portal lowers
the first team's borrowing weight, and when the lender's GPU frees, Kueue gives it to the second,
though the first asked first (with the half-life at 0 the first would get it: first come,
first served)."""

import datetime
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.vocabulary import OPPORTUNISTIC, cluster_queue_name
from gpujobs import services
from gpujobs.models import GpuJob
from tenants import queueing
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import submit, wait_for_state
from tests.integration.gpujobs.kueue import A100, H100

pytestmark = [pytest.mark.devcluster]

State = GpuJob.State
HALF_LIFE_HOURS = 24


def backfill(gpu_team, cluster, *, gpus: int, hours_ago: tuple[float, float]) -> None:
    """A finished opportunistic job of the team in the past: ``gpus`` A100s from ``hours_ago[0]``
    to ``hours_ago[1]`` hours ago."""
    now = timezone.now()
    factories.GpuJobFactory(
        team=gpu_team.team,
        cluster=cluster,
        submitted_by=gpu_team.member,
        priority=GpuJob.Priority.OPPORTUNISTIC,
        gpus=gpus,
        gpu_model=A100,
        state=State.SUCCEEDED,
        started_at=now - datetime.timedelta(hours=hours_ago[0]),
        finished_at=now - datetime.timedelta(hours=hours_ago[1]),
    )


def borrowing_weight_on_cluster(kueue_cluster, team) -> str | None:
    queue = kueue_cluster.objects.get(
        "clusterqueues", cluster_queue_name(settings.PORTAL_NAME, team.slug, OPPORTUNISTIC)
    )
    return ((queue or {}).get("spec", {}).get("fairSharing") or {}).get("weight")


def millis(weight: str | None) -> int:
    if not weight:
        return 0
    return int(weight[:-1]) if weight.endswith("m") else int(Decimal(weight) * 1000)


def test_the_team_with_less_decayed_use_gets_the_next_borrowed_gpu_though_it_asked_second(
    make_kueue_team, running_services, kueue_cluster
):
    lender = make_kueue_team({A100: 1}, name="lender")
    heavy = make_kueue_team({H100: 1}, name="heavy-user")
    light = make_kueue_team({H100: 1}, name="light-user")
    cluster = kueue_cluster.cluster
    backfill(heavy, cluster, gpus=8, hours_ago=(12, 2))  # 80 GPU-h, 66 decayed
    # The admin turns usage decay on: every team's queues are made again, the heavy user's
    # opportunistic queue with its weight 1 lowered to 1 / (1 + 66 / 100).
    cluster = queueing.cluster_set_borrowing(
        actor=kueue_cluster.admin, cluster=cluster, fair_share_half_life_hours=HALF_LIFE_HOURS
    )
    # (66 decayed GPU-h now, a little less each minute: 602m, give or take a thousandth)
    wait_for(
        lambda: 590 <= millis(borrowing_weight_on_cluster(kueue_cluster, heavy.team)) <= 610,
        timeout=90,
        what="the heavy user's borrowing weight about 0.6",
    )
    assert borrowing_weight_on_cluster(kueue_cluster, light.team) in ("1", "1000m")

    # The lender's only A100 is busy with its own work.
    busy = submit(lender.member, lender.team, cluster, name="own", gpus=1, gpu_model=A100)
    assert busy.status_code == 201, busy.content
    wait_for_state(busy.data["id"], State.RUNNING)
    # Both borrowers wait for it, the heavy user first.
    waiting = {}
    for gpu in (heavy, light):
        response = submit(
            gpu.member, gpu.team, cluster, name="borrow", gpus=1, gpu_model=A100,
            priority="opportunistic",
        )  # fmt: skip
        assert response.status_code == 201, response.content
        waiting[gpu.team.slug] = response.data["id"]
        wait_for_state(response.data["id"], State.PENDING)

    services.job_cancel(actor=lender.member, job=GpuJob.objects.get(pk=busy.data["id"]))

    wait_for_state(waiting[light.team.slug], State.RUNNING, timeout=120)
    assert GpuJob.objects.get(pk=waiting[heavy.team.slug]).state == State.PENDING
