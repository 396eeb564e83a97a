"""Nothing approved is lost when the cluster or the worker fails mid-way: the reconcile retries
with backoff (or is delivered again) and the next success converges, visibly."""

import time

import pytest

from tenants.models import TeamCluster
from tests.integration.conftest import wait_for

from .conftest import in_sync, quota_hard, wait_for_gpu_quota, wait_for_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


def test_an_approval_while_the_apiserver_is_down_is_applied_once_it_is_back(
    devcluster, core, kube_cluster, make_team, approve, own_queue, start_worker
):
    team = make_team("outage")
    start_worker(own_queue)

    with devcluster.apiserver_stopped():
        approve(team, kube_cluster, gpus=4)
        down = wait_for_state(
            team,
            kube_cluster,
            lambda s: s.status == TeamCluster.Status.ERROR,
            what="the outage on the team's status",
        )
        assert "Cannot reach the API server of cluster dev" in down.last_error
        assert not down.recovered

    wait_for_gpu_quota(core, team.slug, "4", timeout=90)
    state = in_sync(team, kube_cluster)
    assert state.recovered
    assert state.last_applied_at > state.last_error_at
    # The last error stays on record beside the recovery (right after a restart the API server
    # may still refuse for a moment while its authorizer loads RBAC: retried the same way).
    assert state.last_error
    assert state.consecutive_failures == 0
    assert state.applied_quota["requests.nvidia.com/gpu"] == "4"


def test_a_worker_killed_mid_reconcile_leaves_the_task_to_the_next_worker(
    core, kube_cluster, make_team, approve, own_queue, start_worker, tmp_path
):
    team = make_team("killed")
    marker = tmp_path / "applying"
    slow = start_worker(
        own_queue,
        app="tests.integration.reconcile.slow_worker",
        env={"SLOW_APPLY_MARKER": str(marker), "SLOW_APPLY_SECONDS": "120"},
    )

    approve(team, kube_cluster, gpus=4)
    wait_for(marker.exists, timeout=60, what="the worker to start applying")
    slow.kill()

    # The killed pass recorded nothing and applied nothing: it died before its first write.
    state = TeamCluster.objects.get(team=team, cluster=kube_cluster)
    assert (state.status, state.reconcile_runs) == (TeamCluster.Status.PENDING, 0)
    assert quota_hard(core, team.slug) is None

    time.sleep(2)  # past the broker's visibility timeout for the unacknowledged message
    start_worker(own_queue)

    wait_for_gpu_quota(core, team.slug, "4", timeout=90)
    state = in_sync(team, kube_cluster)
    assert state.reconcile_runs == 1
    assert state.last_error == ""
