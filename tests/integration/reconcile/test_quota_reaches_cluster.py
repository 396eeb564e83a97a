"""Approved quota reaches the team's namespace, and follows every change to the grant."""

import datetime

import pytest
from django.utils import timezone
from kubernetes.client.rest import ApiException

from tenants import quota
from tenants.models import TeamCluster

from .conftest import (
    gpu_pod,
    in_sync,
    quota_hard,
    wait_for_gpu_quota,
    wait_for_quota_status,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


def test_approving_4_gpus_puts_them_in_the_namespace_and_a_pod_asking_5_is_refused(
    celery_worker_process, core, kube_cluster, make_team, approve
):
    team = make_team("a")

    approve(team, kube_cluster, gpus=4)

    hard = wait_for_gpu_quota(core, team.slug, "4")
    assert hard["pods"] == "100"
    namespace = core.read_namespace(team.slug)
    assert namespace.metadata.labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert namespace.metadata.labels["gpuportal.io/team"] == team.slug
    wait_for_quota_status(core, team.slug)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(team.slug, gpu_pod("greedy", gpus=5))
    assert refused.value.status == 403
    assert "exceeded quota: gpu-portal-quota" in refused.value.body
    assert "requests.nvidia.com/gpu=5" in refused.value.body
    assert core.create_namespaced_pod(team.slug, gpu_pod("fits", gpus=4)).metadata.name == "fits"


def test_the_status_says_in_sync_with_what_was_applied(
    celery_worker_process, core, kube_cluster, make_team, approve
):
    team = make_team("a")

    approve(team, kube_cluster, gpus=3)

    state = in_sync(team, kube_cluster)
    assert state.applied_quota["requests.nvidia.com/gpu"] == "3"
    assert state.last_applied_at is not None
    assert state.last_error == ""
    assert state.last_write_count >= 4  # namespace, quota, limit range, bindings


def test_shrinking_the_grant_to_2_updates_the_quota(
    celery_worker_process, core, kube_cluster, make_team, approve, admin_user
):
    team = make_team("a")
    grant = approve(team, kube_cluster, gpus=4)
    wait_for_gpu_quota(core, team.slug, "4")

    quota.quota_grant_shrink(actor=admin_user, grant=grant, gpus=2, note="Less.")

    wait_for_gpu_quota(core, team.slug, "2")


def test_revoking_the_grant_removes_the_gpu_allowance(
    celery_worker_process, core, kube_cluster, make_team, approve, admin_user
):
    team = make_team("a")
    grant = approve(team, kube_cluster, gpus=4)
    wait_for_gpu_quota(core, team.slug, "4")

    quota.quota_grant_revoke(actor=admin_user, grant=grant, note="Done.")

    wait_for_gpu_quota(core, team.slug, "0")
    wait_for_quota_status(core, team.slug)
    with pytest.raises(ApiException, match="exceeded quota"):
        core.create_namespaced_pod(team.slug, gpu_pod("one", gpus=1))


def test_an_expired_grant_leaves_the_quota(
    celery_worker_process, core, kube_cluster, make_team, approve
):
    team = make_team("a")
    today = timezone.localdate()
    approve(team, kube_cluster, gpus=4, ends_on=today)
    approve(team, kube_cluster, gpus=1)
    wait_for_gpu_quota(core, team.slug, "5")

    # The next day the expiry task ends the first grant.
    expired = quota.quota_grants_expire(today=today + datetime.timedelta(days=1))

    assert len(expired) == 1
    wait_for_gpu_quota(core, team.slug, "1")


def test_two_teams_get_their_own_namespaces_and_quotas(
    celery_worker_process, core, kube_cluster, make_team, approve
):
    a, b = make_team("a"), make_team("b")

    approve(a, kube_cluster, gpus=4)
    approve(b, kube_cluster, gpus=2)

    wait_for_gpu_quota(core, a.slug, "4")
    wait_for_gpu_quota(core, b.slug, "2")
    assert TeamCluster.objects.filter(cluster=kube_cluster).count() == 2
    assert quota_hard(core, a.slug)["requests.nvidia.com/gpu"] == "4"
