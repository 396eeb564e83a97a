"""Kueue-mode fixtures for GPU job tests: the devcluster as a Kueue cluster of the portal, teams
with per-model grants, and their Kueue objects.

The queue objects (ResourceFlavors, WorkloadPriorityClasses, each team's two ClusterQueues and
two LocalQueues, and the ResourceQuota's ceiling) are the reconcile's to make (the issue-10
design, "Objects per Kueue-mode cluster"). Until that reconcile is on the branch,
``KueueQueues.reconcile(team)`` makes them here from the database as the design says
(``tests.kueue_objects``): nominal quota per flavor from the team's grants in effect, the
opportunistic queue's borrowing limit and the guaranteed queue's lending limit from
``TeamQueuePolicy``. Each test's queues share a cohort of their own, so tests (and other sessions
on the shared devcluster) never lend to each other.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.utils import timezone
from kubernetes import client

from clusters.models import GpuCapacity, GpuModelCapacity, QuotaMode
from gpujobs import selectors
from tenants import services as tenant_services
from tenants.models import QuotaGrant, TeamCluster, TeamQueuePolicy
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import (
    QUOTA_NAME,
    GpuTeam,
    team_with_members,
    wait_for_quota,
)
from tests.integration.kube import delete_namespace
from tests.kueue_objects import KueueObjects

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
MODELS = {A100: (32, 4, 8), H100: (16, 2, 8)}  # allocatable, nodes, GPUs per node
GPU = "nvidia.com/gpu"


class KueueQueues(KueueObjects):
    """The test's Kueue objects, made from the database as the reconcile would."""

    def __init__(self, api: client.ApiClient, cluster, *, cohort: str):
        super().__init__(
            api,
            portal_name=settings.PORTAL_NAME,
            models=MODELS,
            cohort=cohort,
            node_selector=cluster.gpu_node_selector,
            model_label=cluster.gpu_model_label,
            taint_key=cluster.gpu_taint_key,
        )
        self.cluster = cluster
        self.core = client.CoreV1Api(api)

    def reconcile(self, team) -> dict[str, int]:
        """The team's two ClusterQueues and LocalQueues from its grants and policy, and its
        ResourceQuota's GPU ceiling (own quota plus borrowing limit, or the cluster's GPUs).
        Returns the nominal quota per model ("" for any model)."""
        own = selectors.own_quota_by_model(team=team, cluster=self.cluster, gpu_resource=GPU)
        policy = TeamQueuePolicy.objects.filter(team=team, cluster=self.cluster).first()
        borrowing = policy.borrowing_limit if policy else None
        self.team(
            team.slug,
            own=own,
            borrowing_limit=borrowing,
            lending_limit=policy.lending_limit if policy else None,
            weight=str(policy.fair_sharing_weight) if policy else "1",
        )
        ceiling = sum(own.values()) + (
            borrowing if borrowing is not None else sum(m[0] for m in MODELS.values())
        )
        self.core.patch_namespaced_resource_quota(
            QUOTA_NAME, team.slug, {"spec": {"hard": {f"requests.{GPU}": str(ceiling)}}}
        )
        wait_for_quota(self.core, team.slug, ceiling)
        return own

    def remove(self, team) -> None:
        """The team's queues go (as on a switch to quota only)."""
        self.remove_team(team.slug)


@dataclass
class KueueSetup:
    cluster: object
    queues: KueueQueues
    admin: object


@pytest.fixture
def kueue_cluster(gpu_cluster, k8s, devcluster):
    """The devcluster as a Kueue cluster of the portal: 32 A100 and 16 H100 in its per-model
    inventory, its flavors and priority classes applied, and a cohort of the test's own."""
    if not devcluster.settings.kueue:
        pytest.fail("this devcluster runs without Kueue (DEVCLUSTER_KUEUE=0)")
    gpu_cluster.quota_mode = QuotaMode.KUEUE
    gpu_cluster.save(update_fields=["quota_mode"])
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
    queues = KueueQueues(k8s, gpu_cluster, cohort=f"kj-{uuid.uuid4().hex[:8]}")
    queues.cluster_wide()
    yield KueueSetup(
        cluster=gpu_cluster, queues=queues, admin=factories.AdminFactory(username="kueue-admin")
    )
    queues.cleanup()


@pytest.fixture
def make_kueue_team(kueue_cluster, core, celery_worker_process):
    """``make_kueue_team({A100: 4}, borrowing_limit=2)``: a team with a lead, a member and a
    viewer, one approved grant per model (the key "" for any model), its namespace from the
    portal's reconcile (run by the real worker), and its Kueue queues."""
    made = []

    def make(
        grants: dict[str, int], *, name: str = "team", borrowing_limit=None, lending_limit=None
    ) -> GpuTeam:
        cluster = kueue_cluster.cluster
        team, users = team_with_members(name, prefix="kq")
        slug = team.slug
        if borrowing_limit is not None or lending_limit is not None:
            TeamQueuePolicy.objects.create(
                team=team,
                cluster=cluster,
                borrowing_limit=borrowing_limit,
                lending_limit=lending_limit,
            )
        made.append(slug)
        granted = []
        for model, gpus in grants.items():
            request = tenant_services.quota_request_create(
                requested_by=users["lead"],
                team=team,
                cluster=cluster,
                gpus=gpus,
                justification="Kueue tests.",
                ends_on=timezone.localdate() + datetime.timedelta(days=30),
            )
            grant = tenant_services.quota_request_approve(
                reviewer=kueue_cluster.admin, quota_request=request
            )
            QuotaGrant.objects.filter(pk=grant.pk).update(gpu_model=model)
            granted.append(QuotaGrant.objects.get(pk=grant.pk))
        wait_for(
            lambda: TeamCluster.objects.filter(
                team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC
            ).exists(),
            timeout=120,
            what=f"the reconcile of {slug}",
        )
        wait_for_quota(core, slug, sum(grants.values()))
        kueue_cluster.queues.reconcile(team)
        return GpuTeam(team=team, namespace=slug, grants=granted, **users)

    yield make
    for slug in made:
        delete_namespace(core, slug)
