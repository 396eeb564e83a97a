"""Fixtures and helpers for one portal with two clusters (the conftest imports the fixtures).

One portal, two clusters: the devcluster (``alpha``, 4 A100 and 2 H100 nodes of 8 GPUs) and a
second devcluster beside it (``beta``, instance 2: 2 L40S nodes of 4 GPUs), each registered as a
portal Cluster with its own least-privilege identity, kubeconfig and Prometheus. The real worker
reconciles and submits, the real watcher follows both clusters.

Each test's team has a unique slug; its namespaces on both clusters go when the test ends.
"""

from __future__ import annotations

import datetime
import uuid

import pytest
from django.conf import settings
from django.utils import timezone
from kubernetes import client

from clusters.tasks import sync_cluster_inventory
from tenants import quota as tenant_quota
from tenants.models import Membership, TeamCluster
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.kube import delete_namespace, read_or_none, remove_admission_objects
from tests.integration.portal_identity import mint_portal_identity

PORTAL_USER = "gpu-portal-multicluster-tests"


# --- the second cluster, as its admin ---------------------------------------------------------


@pytest.fixture(scope="session")
def k8s_second(devcluster_second):
    """The second devcluster's admin client, without admission objects a killed session left."""
    api = devcluster_second.api_client()
    remove_admission_objects(api, settings.PORTAL_NAME)
    yield api
    api.close()


@pytest.fixture(scope="session")
def core_second(k8s_second):
    return client.CoreV1Api(k8s_second)


@pytest.fixture(scope="session")
def portal_kubeconfigs(devcluster, k8s, devcluster_second, k8s_second):
    """The portal's identity on each cluster: bound to deploy/rbac.yaml's ClusterRole there and
    nothing else, its client certificate signed by that cluster's own CA."""
    yield (
        mint_portal_identity(devcluster, k8s, user=PORTAL_USER),
        mint_portal_identity(devcluster_second, k8s_second, user=PORTAL_USER),
    )
    remove_admission_objects(k8s, settings.PORTAL_NAME)
    remove_admission_objects(k8s_second, settings.PORTAL_NAME)


# --- the portal's side -------------------------------------------------------------------------


class Clusters:
    """The two portal Clusters and, for each, the admin's CoreV1Api on the cluster behind it."""

    def __init__(self, alpha, beta, core, core_second):
        self.alpha, self.beta = alpha, beta
        self.core = {alpha.name: core, beta.name: core_second}

    def __iter__(self):
        return iter((self.alpha, self.beta))

    def core_of(self, cluster) -> client.CoreV1Api:
        return self.core[cluster.name]


@pytest.fixture
def clusters(
    transactional_db, devcluster, devcluster_second, portal_kubeconfigs, core, core_second
):
    """``alpha`` (the devcluster) and ``beta`` (the second one) as an admin registers them,
    their capacity read from their nodes by the portal's inventory sync."""
    alpha_kubeconfig, beta_kubeconfig = portal_kubeconfigs
    alpha = factories.ClusterFactory(
        name="alpha",
        display_name="Alpha",
        kubeconfig_path=str(alpha_kubeconfig),
        prometheus_url=devcluster.prometheus_url,
    )
    beta = factories.ClusterFactory(
        name="beta",
        display_name="Beta",
        kubeconfig_path=str(beta_kubeconfig),
        prometheus_url=devcluster_second.prometheus_url,
    )
    for cluster in (alpha, beta):
        sync_cluster_inventory(cluster_id=cluster.pk)
    return Clusters(alpha, beta, core, core_second)


@pytest.fixture
def admin_user(transactional_db):
    return factories.AdminFactory(username="mc-admin")


@pytest.fixture
def make_team(transactional_db, clusters):
    """``make_team()``: a team of a unique slug with a lead and a member; its namespaces on
    both clusters go when the test ends."""
    made = []

    def make(name: str = "team"):
        slug = f"mc-{uuid.uuid4().hex[:8]}"
        team = factories.TeamFactory(slug=slug, name=f"{name.title()} {slug[-4:]}")
        for role in ("lead", "member"):
            user = factories.UserFactory(username=f"{role}-{slug}")
            Membership.objects.create(team=team, user=user, role=role)
        made.append(slug)
        return team

    yield make
    for slug in made:
        for core_api in clusters.core.values():
            delete_namespace(core_api, slug)


def member_of(team, role: str):
    return Membership.objects.get(team=team, role=role).user


def request_quota(team, cluster, gpus: int, **kwargs):
    """The team lead's request for ``gpus`` on ``cluster`` for 30 days."""
    kwargs.setdefault("justification", "Two clusters.")
    kwargs.setdefault("ends_on", timezone.localdate() + datetime.timedelta(days=30))
    return tenant_quota.quota_request_create(
        requested_by=member_of(team, "lead"), team=team, cluster=cluster, gpus=gpus, **kwargs
    )


@pytest.fixture
def grant(admin_user, clusters, celery_worker_process):
    """``grant(team, cluster, gpus)``: a request approved by an admin; waits until the worker's
    reconcile brought that cluster's namespace in line (in sync, the GPU quota counted)."""

    def approve(team, cluster, gpus: int, **kwargs):
        quota_request = request_quota(team, cluster, gpus, **kwargs)
        approved = tenant_quota.quota_request_approve(
            reviewer=admin_user, quota_request=quota_request
        )
        in_sync(team, cluster)
        return approved

    return approve


def in_sync(team, cluster, *, timeout: float = 120) -> TeamCluster:
    return wait_for(
        lambda: TeamCluster.objects.filter(
            team=team, cluster=cluster, status=TeamCluster.Status.IN_SYNC
        ).first(),
        timeout=timeout,
        what=f"{team.slug} in sync on {cluster.name}",
    )


def gpu_quota(core_api, namespace: str) -> str | None:
    quota = read_or_none(
        core_api.read_namespaced_resource_quota, f"{settings.PORTAL_NAME}-quota", namespace
    )
    return None if quota is None else (quota.spec.hard or {}).get("requests.nvidia.com/gpu")
