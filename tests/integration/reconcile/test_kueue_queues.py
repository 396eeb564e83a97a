"""Kueue mode on the devcluster, through the real worker with deploy/rbac.yaml's role: the
portal's flavors, priority classes and each team's queues follow the grants, the queue policies,
the GPU models and the cluster's mode; hand edits are repaired; Kueue down is an error on record
until it is back; and Kueue admits Jobs through the queues the portal made."""

import datetime

import pytest
from django.utils import timezone

from clusters.kube import KubeClient
from clusters.models import GpuModelCapacity
from clusters.tasks import sync_cluster_inventory
from clusters.vocabulary import (
    KUEUE_PRIORITY_CLASS_LABEL,
    KUEUE_QUEUE_LABEL,
    cluster_queue_name,
    resource_flavor_name,
)
from reconcile import tasks, team_pass
from tenants import queueing, quota, services
from tenants.models import ClusterState, TeamCluster
from tests.integration.conftest import wait_for

from .conftest import A100, H100, in_sync, read_or_none, wait_for_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture(autouse=True)
def _clean_cohort(kueue_clean):
    """Set up first, so torn down last: after the test's namespaces are deleted."""


def gpu_quota_of(core, portal, namespace):
    """The GPUs the team's ResourceQuota (named after the portal) allows."""
    quota = read_or_none(core.read_namespaced_resource_quota, f"{portal.name}-quota", namespace)
    return None if quota is None else (quota.spec.hard or {}).get("requests.nvidia.com/gpu")


def wait_for_nominal(portal, queue, flavor_model, gpus, *, timeout=60):
    flavor = resource_flavor_name(portal.name, flavor_model)
    return wait_for(
        lambda: portal.objects.nominal_quota(queue).get(flavor) == gpus,
        timeout=timeout,
        what=f"nominalQuota {gpus} on {flavor} in {queue}",
    )


def guaranteed_queue(portal, team):
    return cluster_queue_name(portal.name, team.slug, "guaranteed")


def opportunistic_queue(portal, team):
    return cluster_queue_name(portal.name, team.slug, "opportunistic")


def cluster_in_sync(cluster, *, timeout=60):
    return wait_for(
        lambda: ClusterState.objects.filter(
            cluster=cluster, status=ClusterState.Status.IN_SYNC
        ).first(),
        timeout=timeout,
        what=f"the cluster-wide objects of {cluster.name} in sync",
    )


# --- objects from grants and policies ----------------------------------------------------------


def test_an_a100_grant_gives_nominal_quota_on_the_a100_flavor_and_the_team_its_two_queues(
    kueue_portal, core, queue_cluster, make_team, approve, admin_user
):
    portal, team = kueue_portal, make_team("a")

    approve(team, queue_cluster, gpus=4, gpu_model=A100)

    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "4")
    in_sync(team, queue_cluster)
    assert portal.objects.nominal_quota(guaranteed_queue(portal, team)) == {
        resource_flavor_name(portal.name, A100): "4",
        resource_flavor_name(portal.name, H100): "0",
        resource_flavor_name(portal.name, ""): "0",
    }
    assert portal.objects.names("localqueues", team.slug) == ["guaranteed", "opportunistic"]
    local = portal.objects.get("localqueues", "opportunistic", team.slug)
    assert local["spec"]["clusterQueue"] == opportunistic_queue(portal, team)
    cluster_in_sync(queue_cluster)
    assert portal.objects.names("resourceflavors") == sorted(
        [
            resource_flavor_name(portal.name, A100),
            resource_flavor_name(portal.name, H100),
            f"{portal.name}-any-gpu",
            f"{portal.name}-cpu-memory",
        ]
    )
    assert portal.objects.names("workloadpriorityclasses") == [
        f"{portal.name}-guaranteed",
        f"{portal.name}-opportunistic",
        f"{portal.name}-opportunistic-protected",
    ]
    # No policy: borrows without limit, so the quota's ceiling is the cluster's 48 GPUs.
    assert gpu_quota_of(core, portal, team.slug) == "48"


def test_the_queue_policy_sets_limits_weight_and_the_quotas_ceiling(
    kueue_portal, core, queue_cluster, make_team, approve, admin_user
):
    portal, team = kueue_portal, make_team("a")
    approve(team, queue_cluster, gpus=4, gpu_model=A100)

    queueing.team_queue_policy_set(
        actor=admin_user,
        team=team,
        cluster=queue_cluster,
        borrowing_limit=2,
        lending_limit=1,
        fair_sharing_weight="2",
    )

    # Own 4 plus 2 on each of the 3 GPU flavors.
    wait_for(lambda: gpu_quota_of(core, portal, team.slug) == "10", what="the ceiling of 10")
    in_sync(team, queue_cluster)
    guaranteed = portal.objects.get("clusterqueues", guaranteed_queue(portal, team))
    opportunistic = portal.objects.get("clusterqueues", opportunistic_queue(portal, team))
    (a100, *_) = guaranteed["spec"]["resourceGroups"][0]["flavors"]
    assert a100["resources"][0]["lendingLimit"] == "1"
    assert a100["resources"][0]["borrowingLimit"] == "0"
    borrowing = {
        r["borrowingLimit"]
        for f in opportunistic["spec"]["resourceGroups"][0]["flavors"]
        for r in f["resources"]
    }
    assert borrowing == {"2"}
    assert guaranteed["spec"]["fairSharing"]["weight"] == "2"
    assert guaranteed["spec"]["cohortName"] == opportunistic["spec"]["cohortName"] == portal.name


def test_shrink_and_expiry_lower_the_nominal_quota(
    kueue_portal, queue_cluster, make_team, approve, admin_user
):
    portal, team = kueue_portal, make_team("a")
    today = timezone.localdate()
    approve(team, queue_cluster, gpus=4, gpu_model=A100, ends_on=today)
    lasting = approve(team, queue_cluster, gpus=2, gpu_model=A100)
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "6")

    quota.quota_grant_shrink(actor=admin_user, grant=lasting, gpus=1, note="Less.")
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "5")

    expired = quota.quota_grants_expire(today=today + datetime.timedelta(days=1))

    assert len(expired) == 1
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "1")


def test_when_the_grant_goes_its_quota_goes_and_an_archived_teams_queues_are_pruned(
    kueue_portal, queue_cluster, make_team, approve, admin_user
):
    portal, team = kueue_portal, make_team("a")
    grant = approve(team, queue_cluster, gpus=4, gpu_model=A100)
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "4")

    quota.quota_grant_revoke(actor=admin_user, grant=grant, note="Done.")
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "0")

    services.team_archive(actor=admin_user, team=team)

    wait_for(
        lambda: not portal.objects.names("clusterqueues"),
        what="the archived team's ClusterQueues pruned",
    )
    state = in_sync(team, queue_cluster)
    assert portal.objects.names("localqueues", team.slug) == []
    assert not state.queues_applied
    # The flavors are the cluster's, not the team's: they stay.
    assert resource_flavor_name(portal.name, A100) in portal.objects.names("resourceflavors")


# --- drift -------------------------------------------------------------------------------------


def test_hand_edits_of_queues_and_flavors_are_repaired_by_the_sweep(
    kueue_portal, queue_cluster, make_team, approve
):
    portal, team = kueue_portal, make_team("a")
    approve(team, queue_cluster, gpus=4, gpu_model=A100)
    queue = guaranteed_queue(portal, team)
    wait_for_nominal(portal, queue, A100, "4")
    in_sync(team, queue_cluster)
    cluster_in_sync(queue_cluster)
    edited = portal.objects.get("clusterqueues", queue)
    edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "40"
    portal.objects.patch(
        "clusterqueues", queue, {"spec": {"resourceGroups": edited["spec"]["resourceGroups"]}}
    )
    portal.objects.delete("localqueues", "opportunistic", team.slug)
    a100 = resource_flavor_name(portal.name, A100)
    portal.objects.patch(
        "resourceflavors", a100, {"spec": {"nodeLabels": {"nvidia.com/gpu.product": "other"}}}
    )
    assert portal.objects.nominal_quota(queue)[a100] == "40"

    enqueued = tasks.reconcile_sweep()

    assert enqueued == 2  # the team on the cluster, and the cluster-wide objects
    wait_for_nominal(portal, queue, A100, "4")
    wait_for(
        lambda: portal.objects.get("localqueues", "opportunistic", team.slug),
        what="the deleted LocalQueue back",
    )
    wait_for(
        lambda: (
            portal.objects.get("resourceflavors", a100)["spec"]["nodeLabels"].get(
                "nvidia.com/gpu.product"
            )
            == A100
        ),
        what="the flavor's model label back",
    )


# --- the cluster's mode ------------------------------------------------------------------------


def test_switching_to_quota_only_and_back_leaves_the_right_objects(
    kueue_portal, core, queue_cluster, make_team, approve, admin_user
):
    portal, team = kueue_portal, make_team("a")
    approve(team, queue_cluster, gpus=4, gpu_model=A100)
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "4")
    wait_for(lambda: gpu_quota_of(core, portal, team.slug) == "48", what="the Kueue ceiling")

    queueing.cluster_set_quota_mode(actor=admin_user, cluster=queue_cluster, quota_mode="quota")

    wait_for(
        lambda: (
            not any(
                portal.objects.names(plural)
                for plural in ("clusterqueues", "resourceflavors", "workloadpriorityclasses")
            )
        ),
        what="every Kueue object of the portal pruned",
    )
    assert portal.objects.names("localqueues", team.slug) == []
    wait_for(lambda: gpu_quota_of(core, portal, team.slug) == "4", what="the quota at the grant")
    state = in_sync(team, queue_cluster)
    assert not state.queues_applied
    assert not cluster_in_sync(queue_cluster).queues_applied
    # A quota only pass over the unchanged cluster reads as it did before Kueue mode existed.
    outcome = team_pass.reconcile_team_on_cluster(
        team_id=team.pk, cluster_id=queue_cluster.pk, kube=KubeClient.for_cluster(queue_cluster)
    )
    assert (outcome.reads, outcome.writes) == (5, 0)

    queueing.cluster_set_quota_mode(actor=admin_user, cluster=queue_cluster, quota_mode="kueue")

    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "4")
    wait_for(lambda: gpu_quota_of(core, portal, team.slug) == "48", what="the ceiling again")
    wait_for(lambda: len(portal.objects.names("resourceflavors")) == 4, what="the flavors again")
    assert portal.objects.names("localqueues", team.slug) == ["guaranteed", "opportunistic"]


# --- the GPU models follow the nodes -----------------------------------------------------------


def test_a_new_gpu_model_gets_a_flavor_and_loses_it_with_its_last_node(
    kueue_portal, devcluster, queue_cluster, make_team, approve
):
    portal, team = kueue_portal, make_team("a")
    pool = f"pool-{portal.name}"
    model = f"NVIDIA-L4-{portal.name.upper()}"
    approve(team, queue_cluster, gpus=4, gpu_model=A100)
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "4")
    node = devcluster.add_gpu_node(gpus=4, gpu_model=model, labels={"pool": pool})
    flavor = resource_flavor_name(portal.name, model)
    try:
        sync_cluster_inventory(cluster_id=queue_cluster.pk)

        assert GpuModelCapacity.objects.get(cluster=queue_cluster, gpu_model=model).nodes == 1
        wait_for(lambda: portal.objects.get("resourceflavors", flavor), what="the L4 flavor")
        wait_for(
            lambda: flavor in portal.objects.nominal_quota(guaranteed_queue(portal, team)),
            what="the team's queue listing the L4 flavor",
        )
    finally:
        devcluster.remove_node(node)

    sync_cluster_inventory(cluster_id=queue_cluster.pk)

    assert not GpuModelCapacity.objects.filter(cluster=queue_cluster, gpu_model=model).exists()
    wait_for(
        lambda: flavor not in portal.objects.nominal_quota(guaranteed_queue(portal, team)),
        what="the team's queue without the L4 flavor",
    )
    wait_for(
        lambda: flavor not in portal.objects.names("resourceflavors"), what="the L4 flavor pruned"
    )


# --- Kueue down --------------------------------------------------------------------------------


def test_while_kueue_is_stopped_the_reconcile_records_the_error_and_succeeds_once_it_is_back(
    kueue_portal, devcluster, queue_cluster, make_team, approve
):
    portal, team = kueue_portal, make_team("a")
    approve(team, queue_cluster, gpus=4, gpu_model=A100)
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "4")
    in_sync(team, queue_cluster)

    with devcluster.kueue_stopped():
        approve(team, queue_cluster, gpus=2, gpu_model=A100)
        down = wait_for_state(
            team,
            queue_cluster,
            lambda s: s.status == TeamCluster.Status.ERROR,
            what="Kueue's outage on the team's status",
        )
        assert "webhook" in down.last_error
        assert "Kueue" in down.last_error
        assert (
            portal.objects.nominal_quota(guaranteed_queue(portal, team))[
                resource_flavor_name(portal.name, A100)
            ]
            == "4"
        )

    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "6", timeout=90)
    state = in_sync(team, queue_cluster)
    assert state.recovered


# --- Kueue admits through the portal's queues --------------------------------------------------


def queued_job(name, portal, gpus, *, kind="guaranteed", gpu_model=None):
    """A Job as the job side makes them in Kueue mode: suspended, with the queue and priority
    labels; its CPU and memory come from the namespace's LimitRange."""
    spec = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/trainer:1",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if gpu_model:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": gpu_model}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {
                KUEUE_QUEUE_LABEL: kind,
                KUEUE_PRIORITY_CLASS_LABEL: f"{portal.name}-{kind}",
            },
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "activeDeadlineSeconds": 3600,
            "template": {"spec": spec},
        },
    }


def workload_condition(portal, namespace, job_name, kind):
    workloads = portal.objects.api.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads"
    )["items"]
    for workload in workloads:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["name"] == job_name for o in owners):
            for condition in workload.get("status", {}).get("conditions", []):
                if condition["type"] == kind:
                    return condition
    return None


def test_kueue_admits_an_a100_job_through_the_portals_queues_and_an_h100_job_waits(
    kueue_portal, core, batch, queue_cluster, make_team, approve
):
    portal, team = kueue_portal, make_team("a")
    approve(team, queue_cluster, gpus=4, gpu_model=A100)
    wait_for_nominal(portal, guaranteed_queue(portal, team), A100, "4")
    in_sync(team, queue_cluster)
    cluster_in_sync(queue_cluster)

    batch.create_namespaced_job(team.slug, queued_job("a100", portal, 2))
    batch.create_namespaced_job(team.slug, queued_job("h100", portal, 1, gpu_model=H100))

    admitted = wait_for(
        lambda: (
            (c := workload_condition(portal, team.slug, "a100", "Admitted"))
            and c["status"] == "True"
        ),
        what="the A100 job admitted",
    )
    assert admitted
    pod = wait_for(
        lambda: next(
            (
                p
                for p in core.list_namespaced_pod(team.slug, label_selector="job-name=a100").items
                if p.status.phase == "Running"
            ),
            None,
        ),
        what="the A100 job's pod running",
    )
    assert core.read_node(pod.spec.node_name).metadata.labels["nvidia.com/gpu.product"] == A100
    waiting = wait_for(
        lambda: (
            (c := workload_condition(portal, team.slug, "h100", "QuotaReserved"))
            and c["reason"] == "Pending"
            and c
        ),
        what="the H100 job waiting",
    )
    assert "insufficient" in waiting["message"]
    assert batch.read_namespaced_job("h100", team.slug).spec.suspend is True
