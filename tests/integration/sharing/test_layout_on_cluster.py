"""A sharing layout's whole loop on the devcluster, the GPU Operator played by its sharing
manager (devcluster/sharing_manager.py): approved, the worker picks gpu-node-sharable-0 (2 whole
A100), cordons and labels it, waits for 14 x nvidia.com/mig-1g.10gb and
``mig.config.state=success``, uncordons it and changes the grants, and the team's ResourceQuota
follows; after its last day it is reverted to 2 whole GPUs and the grants come back. A node the
manager fails on (annotation ``sharing-fail``) leaves the node's labels and the grants as they
were, and the layout says why.

The worker acts with deploy/rbac.yaml's role (the reconcile suite's identity), so a verb the
loop needs and the role lacks fails here. The cluster's GPU node selector names only the
sharable node, so no other test's node is ever repartitioned."""

import datetime

import pytest
from django.utils import timezone

from clusters.models import GpuCapacity
from clusters.tasks import sync_cluster_inventory
from sharing import services
from sharing.models import LayoutRequest
from sharing.reverting import revert_due
from tenants.models import QuotaGrant
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.reconcile.conftest import quota_hard

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

A100 = "NVIDIA-A100-SXM4-80GB"
MIG = "nvidia.com/mig-1g.10gb"
FAIL_ANNOTATION = "devcluster.gpuportal.io/sharing-fail"
State = LayoutRequest.State


@pytest.fixture
def sharing_cluster(gpu_sharing, portal_kubeconfig):
    cluster = factories.ClusterFactory(
        name="dev-sharing",
        kubeconfig_path=str(portal_kubeconfig),
        gpu_node_selector={
            "hardware-type": "gpu",
            "kubernetes.io/hostname": gpu_sharing.sharable_node,
        },
    )
    sync_cluster_inventory(cluster_id=cluster.pk)
    assert GpuCapacity.objects.get(cluster=cluster, resource_name="nvidia.com/gpu").allocatable == 2
    return cluster


@pytest.fixture
def granted(make_team, approve, sharing_cluster):
    """A team with 2 whole A100 for 30 days, and its lead."""
    team = make_team("slices")
    grant = approve(
        team,
        sharing_cluster,
        gpus=2,
        gpu_model=A100,
        ends_on=timezone.localdate() + datetime.timedelta(days=30),
    )
    lead = team.memberships.get(role="lead").user
    return team, grant, lead


def ask_and_approve(lead, grant, reviewer) -> LayoutRequest:
    layout = services.layout_create(
        requested_by=lead,
        team=grant.team,
        source_grant=grant,
        gpus=2,
        kind="mig",
        mig_profile="1g.10gb",
        ends_on=timezone.localdate() + datetime.timedelta(days=7),
        justification="A slice per notebook.",
    )
    return services.layout_approve(reviewer=reviewer, layout=layout, note="Go.")


def settled(layout: LayoutRequest, *states, timeout: float = 90) -> LayoutRequest:
    return wait_for(
        lambda: (fresh := LayoutRequest.objects.get(pk=layout.pk)).state in states and fresh,
        timeout=timeout,
        what=f"layout #{layout.pk} to be {' or '.join(states)}",
    )


def test_approved_the_node_becomes_slices_the_grants_follow_and_after_its_end_it_reverts(
    celery_worker_process,
    gpu_sharing,
    core,
    granted,
    admin_user,
    sharing_cluster,
):
    team, grant, lead = granted
    node = gpu_sharing.sharable_node

    layout = settled(ask_and_approve(lead, grant, admin_user), State.APPLIED, State.FAILED)

    assert layout.state == State.APPLIED, layout.error
    assert layout.nodes == [node]
    read = gpu_sharing.wait_for_allocatable(node, MIG, 14)
    assert read.metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb"
    assert read.metadata.labels["nvidia.com/mig.config.state"] == "success"
    assert not read.spec.unschedulable
    grant.refresh_from_db()
    assert grant.state == QuotaGrant.State.REVOKED  # all of it converted
    slices = layout.slice_grant
    assert (slices.gpu_resource, slices.gpu_model, slices.gpus) == (MIG, A100, 14)
    assert GpuCapacity.objects.get(cluster=sharing_cluster, resource_name=MIG).allocatable == 14
    wait_for(
        lambda: (quota_hard(core, team.slug) or {}).get(f"requests.{MIG}") == "14",
        what=f"requests.{MIG}=14 in {team.slug}'s ResourceQuota",
    )

    # The day after its last day: the periodic check reverts it.
    assert revert_due(today=layout.ends_on + datetime.timedelta(days=1)) == [layout.pk]
    layout = settled(layout, State.REVERTED)

    read = gpu_sharing.wait_for_allocatable(node, "nvidia.com/gpu", 2)
    assert read.metadata.labels["nvidia.com/mig.config"] == "all-disabled"
    assert not read.spec.unschedulable
    assert int((read.status.allocatable or {}).get(MIG, 0) or 0) == 0
    layout.slice_grant.refresh_from_db()
    assert layout.slice_grant.state == QuotaGrant.State.EXPIRED
    returned = layout.returned_grant
    assert (returned.gpu_resource, returned.gpu_model, returned.gpus) == (
        "nvidia.com/gpu",
        A100,
        2,
    )
    assert returned.ends_on == grant.ends_on
    wait_for(
        lambda: (quota_hard(core, team.slug) or {}).get("requests.nvidia.com/gpu") == "2",
        what=f"requests.nvidia.com/gpu=2 in {team.slug}'s ResourceQuota again",
    )


def test_a_node_the_operator_fails_on_stays_as_it_was_and_the_layout_says_why(
    celery_worker_process,
    gpu_sharing,
    core,
    granted,
    admin_user,
):
    team, grant, lead = granted
    node = gpu_sharing.sharable_node
    before = dict(gpu_sharing.read_node(node).metadata.labels)
    core.patch_node(node, {"metadata": {"annotations": {FAIL_ANNOTATION: "ECC errors"}}})
    try:
        layout = settled(ask_and_approve(lead, grant, admin_user), State.APPLIED, State.FAILED)
    finally:
        core.patch_node(node, {"metadata": {"annotations": {FAIL_ANNOTATION: None}}})

    assert layout.state == State.FAILED
    assert node in layout.error
    assert "nvidia.com/mig.config.state=failed" in layout.error
    read = gpu_sharing.read_node(node)
    sharing_labels = ("nvidia.com/mig.config", "nvidia.com/mig.config.state")
    assert {k: read.metadata.labels.get(k) for k in sharing_labels} == {
        k: before.get(k) for k in sharing_labels
    }
    assert not read.spec.unschedulable
    assert int(read.status.allocatable["nvidia.com/gpu"]) == 2
    grant.refresh_from_db()
    assert (grant.state, grant.gpus) == (QuotaGrant.State.ACTIVE, 2)
    assert layout.slice_grant is None
    assert not QuotaGrant.objects.filter(team=team, gpu_resource=MIG).exists()
