"""Kueue-mode fixtures for GPU job tests: the devcluster as a Kueue cluster of the portal, and
teams with per-model grants whose Kueue objects (two ClusterQueues, two LocalQueues, the
ResourceQuota's ceiling) and the cluster's flavors and priority classes come from the portal's
own reconcile, run by the real worker, as in production.

Kueue's cluster-wide objects and the cohort are named after the portal (``PORTAL_NAME``, here the
default ``gpu-portal``): the teams a test makes are the only ones in the cohort while it runs,
because each test's teams' ClusterQueues are deleted (and waited for) when it ends.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.utils import timezone
from kubernetes.client.rest import ApiException

from clusters.models import GpuCapacity, GpuModelCapacity, QuotaMode
from clusters.vocabulary import LOCAL_QUEUES, cluster_queue_name
from reconcile import desired_state
from tenants import queueing
from tenants import quota as tenant_quota
from tenants.models import ClusterState, Team, TeamCluster
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import GpuTeam, team_with_members
from tests.integration.kube import delete_namespace, remove_admission_objects
from tests.integration.kueue_portal import KueueObjects

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
MODELS = {A100: (32, 4, 8), H100: (16, 2, 8)}  # allocatable, nodes, GPUs per node
GPU_QUOTA = "requests.nvidia.com/gpu"


@dataclass
class KueueSetup:
    cluster: object
    admin: object
    objects: KueueObjects

    def set_mode(self, mode: str):
        """Switch the cluster's quota mode as an admin does (the reconcile follows)."""
        self.cluster = queueing.cluster_set_quota_mode(
            actor=self.admin, cluster=self.cluster, quota_mode=mode
        )
        return self.cluster

    def queues_of(self, team) -> list[str]:
        return [cluster_queue_name(settings.PORTAL_NAME, team.slug, kind) for kind in LOCAL_QUEUES]

    def wait_for_queues(self, team, *, timeout: float = 90) -> None:
        wait_for(
            lambda: (
                all(self.objects.get("clusterqueues", q) for q in self.queues_of(team))
                and all(self.objects.get("localqueues", k, team.slug) for k in LOCAL_QUEUES)
            ),
            timeout=timeout,
            what=f"team {team.slug}'s queues",
        )

    def wait_for_own(self, team, flavor_gpus: dict[str, str], *, timeout: float = 90) -> None:
        """Until the team's guaranteed queue holds these nominal GPUs per flavor."""
        queue = self.queues_of(team)[0]
        wait_for(
            lambda: (
                {
                    flavor: gpus
                    for flavor, gpus in self.objects.nominal_quota(queue).items()
                    if gpus not in ("0", 0)
                }
                == flavor_gpus
            ),
            timeout=timeout,
            what=f"nominal quota {flavor_gpus} in {queue}",
        )


def gpu_ceiling(core, namespace: str) -> str | None:
    try:
        quota = core.read_namespaced_resource_quota(f"{settings.PORTAL_NAME}-quota", namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return (quota.spec.hard or {}).get(GPU_QUOTA)


def wait_for_ceiling(core, namespace: str, gpus: int, *, timeout: float = 90) -> None:
    """Until the namespace's GPU quota is ``gpus`` and the quota controller counts against it."""

    def counted():
        try:
            quota = core.read_namespaced_resource_quota(f"{settings.PORTAL_NAME}-quota", namespace)
        except ApiException:
            return False
        hard = quota.spec.hard or {}
        return (
            hard.get(GPU_QUOTA) == str(gpus)
            and quota.status is not None
            and quota.status.hard == hard
            and quota.status.used is not None
        )

    wait_for(counted, timeout=timeout, what=f"{GPU_QUOTA}={gpus} counted in {namespace}")


@pytest.fixture
def kueue_cluster(gpu_cluster, k8s, core, devcluster, celery_worker_process):
    """The devcluster switched to Kueue mode by an admin, with 32 A100s and 16 H100s in its
    per-model inventory (as the capacity sync writes them); its flavors and priority classes
    applied by the real worker. At the end every team's namespace and ClusterQueues go (and
    are waited for), so the next test's cohort starts empty."""
    if not devcluster.settings.kueue:
        pytest.fail("this devcluster runs without Kueue (DEVCLUSTER_KUEUE=0)")
    GpuCapacity.objects.filter(cluster=gpu_cluster).update(
        allocatable=sum(m[0] for m in MODELS.values()), gpu_model=",".join(MODELS)
    )
    for model, (allocatable, nodes, per_node) in MODELS.items():
        GpuModelCapacity.objects.create(
            cluster=gpu_cluster,
            gpu_model=model,
            allocatable=allocatable,
            nodes=nodes,
            max_per_node=per_node,
        )
    setup = KueueSetup(
        cluster=gpu_cluster,
        admin=factories.AdminFactory(username="kueue-admin"),
        objects=KueueObjects(k8s, settings.PORTAL_NAME),
    )
    setup.set_mode(QuotaMode.KUEUE)
    wait_for(
        lambda: ClusterState.objects.filter(
            cluster=gpu_cluster, status=ClusterState.Status.IN_SYNC
        ).exists(),
        timeout=90,
        what="the cluster's flavors and priority classes",
    )
    yield setup
    teams = list(Team.objects.all())
    queues = [q for team in teams for q in setup.queues_of(team)]
    for team in teams:
        delete_namespace(core, team.slug)
    for queue in queues:
        setup.objects.delete("clusterqueues", queue)
    # A ClusterQueue goes once its namespace's Workloads are gone.
    wait_for(
        lambda: not any(setup.objects.get("clusterqueues", q) for q in queues),
        timeout=120,
        what="the test's ClusterQueues gone from the cohort",
    )
    # Kueue mode's admission policies refuse bare GPU pods: the tests after this one (a
    # monitoring test's pod in a namespace labelled as the portal's) start from none; their
    # own passes install their mode's.
    remove_admission_objects(k8s, settings.PORTAL_NAME)


@pytest.fixture
def make_kueue_team(kueue_cluster, core, celery_worker_process):
    """``make_kueue_team({A100: 4}, borrowing_limit=2, fair_sharing_weight="3")``: a team with a
    lead, a member and a viewer, its queue policy, and one approved grant per model (the key ""
    for any model); the worker's reconcile makes its namespace, queues and ResourceQuota ceiling
    (``kueue_cluster`` removes them at the end)."""

    def make(
        grants: dict[str, int],
        *,
        name: str = "team",
        borrowing_limit: int | None = None,
        lending_limit: int | None = None,
        fair_sharing_weight: str = "1",
    ) -> GpuTeam:
        cluster = kueue_cluster.cluster
        team, users = team_with_members(name, prefix="kq")
        if borrowing_limit is not None or lending_limit is not None or fair_sharing_weight != "1":
            queueing.team_queue_policy_set(
                actor=kueue_cluster.admin,
                team=team,
                cluster=cluster,
                borrowing_limit=borrowing_limit,
                lending_limit=lending_limit,
                fair_sharing_weight=fair_sharing_weight,
            )
        granted = []
        for model, gpus in grants.items():
            request = tenant_quota.quota_request_create(
                requested_by=users["lead"],
                team=team,
                cluster=cluster,
                gpus=gpus,
                gpu_model=model,
                justification="Kueue tests.",
                ends_on=timezone.localdate() + datetime.timedelta(days=30),
            )
            granted.append(
                tenant_quota.quota_request_approve(
                    reviewer=kueue_cluster.admin, quota_request=request
                )
            )
        wait_for(
            lambda: TeamCluster.objects.filter(
                team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC
            ).exists(),
            timeout=120,
            what=f"the reconcile of {team.slug}",
        )
        kueue_cluster.wait_for_queues(team)
        limits = desired_state.team_queue_limits(team=team, cluster=cluster)
        wait_for_ceiling(core, team.slug, limits.ceiling["nvidia.com/gpu"])
        return GpuTeam(team=team, namespace=team.slug, grants=granted, **users)

    return make
