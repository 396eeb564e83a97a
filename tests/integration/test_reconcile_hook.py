"""Grant changes reach a real Celery worker through Redis after the change commits."""

import pytest

from tenants import quota, services
from tenants.models import TeamCluster
from tests import factories
from tests.integration.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def reconcile_runs(team, cluster) -> int:
    state = TeamCluster.objects.filter(team=team, cluster=cluster).first()
    return state.reconcile_runs if state else 0


def test_approving_a_request_runs_the_reconcile_task_in_the_worker(
    celery_worker_process, admin, team, cluster
):
    # Given a pending request
    quota_request = factories.QuotaRequestFactory(team=team, cluster=cluster, gpus=2)

    # When an admin approves it
    quota.quota_request_approve(reviewer=admin, quota_request=quota_request)

    # Then the worker records a reconcile of that team on that cluster
    wait_for(lambda: reconcile_runs(team, cluster) >= 1, what="the reconcile task to run")
    state = TeamCluster.objects.get(team=team, cluster=cluster)
    assert state.last_reconciled_at >= state.reconcile_requested_at


def test_revoking_and_shrinking_a_grant_each_run_the_reconcile_task(
    celery_worker_process, admin, team, cluster
):
    # Given an active grant whose reconcile has run
    grant = quota.quota_request_approve(
        reviewer=admin, quota_request=factories.QuotaRequestFactory(team=team, cluster=cluster)
    )
    wait_for(lambda: reconcile_runs(team, cluster) == 1, what="the first reconcile")

    # When it is shrunk and then revoked
    quota.quota_grant_shrink(actor=admin, grant=grant, gpus=1, note="less")
    wait_for(lambda: reconcile_runs(team, cluster) == 2, what="the reconcile after shrinking")
    quota.quota_grant_revoke(actor=admin, grant=grant, note="done")

    # Then each change ran one more reconcile
    wait_for(lambda: reconcile_runs(team, cluster) == 3, what="the reconcile after revoking")


def test_a_rolled_back_approval_enqueues_nothing(celery_worker_process, admin, team, cluster):
    # Given a request that asks for more than the cluster can grant
    quota_request = factories.QuotaRequestFactory(team=team, cluster=cluster, gpus=17)

    # When the approval fails its capacity check
    with pytest.raises(services.ValidationError):
        quota.quota_request_approve(reviewer=admin, quota_request=quota_request)

    # Then no reconcile marker was written, so nothing was scheduled
    assert not TeamCluster.objects.filter(team=team, cluster=cluster).exists()
