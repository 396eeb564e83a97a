"""The capacity admins plan with follows the cluster's Ready GPU nodes."""

import uuid

import pytest

from clusters.models import GpuCapacity, GpuModelCapacity
from clusters.tasks import sync_all_inventories, sync_cluster_inventory
from tests import factories
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture
def pool(devcluster):
    """A label only this test's nodes carry, so nodes other tests add or remove do not count."""
    name = f"pool-{uuid.uuid4().hex[:6]}"
    added = []

    def add(gpus=8, gpu_model="NVIDIA-H100-80GB-HBM3"):
        node = devcluster.add_gpu_node(gpus=gpus, gpu_model=gpu_model, labels={"pool": name})
        added.append(node)
        return node

    yield name, add, added
    for node in added:
        devcluster.remove_node(node)


def capacity(cluster) -> int:
    row = GpuCapacity.objects.filter(cluster=cluster, resource_name="nvidia.com/gpu").first()
    return row.capacity if row else 0


def review_queue_capacity(api, admin, quota_request) -> int:
    items = api.as_user(admin).get("/api/v1/quota-requests/review-queue/").json()["results"]
    (item,) = [i for i in items if i["id"] == quota_request.pk]
    return item["capacity"]["capacity"]


def test_adding_a_gpu_node_raises_the_capacity_the_review_queue_shows_and_removing_it_lowers_it(
    devcluster, pool, kube_cluster, admin_user, api
):
    name, add, added = pool
    kube_cluster.gpu_node_selector = {"hardware-type": "gpu", "pool": name}
    kube_cluster.save()
    pending = factories.QuotaRequestFactory(cluster=kube_cluster, gpus=4)
    add(gpus=8)
    sync_cluster_inventory(cluster_id=kube_cluster.pk)
    assert review_queue_capacity(api, admin_user, pending) == 8

    second = add(gpus=4)
    sync_cluster_inventory(cluster_id=kube_cluster.pk)
    assert review_queue_capacity(api, admin_user, pending) == 12
    row = GpuCapacity.objects.get(cluster=kube_cluster, resource_name="nvidia.com/gpu")
    assert row.gpu_model == "NVIDIA-H100-80GB-HBM3"

    devcluster.remove_node(second)
    added.remove(second)
    sync_cluster_inventory(cluster_id=kube_cluster.pk)
    assert review_queue_capacity(api, admin_user, pending) == 8


def test_the_admin_cap_stays_a_lower_limit(devcluster, pool, kube_cluster):
    name, add, _ = pool
    kube_cluster.gpu_node_selector = {"hardware-type": "gpu", "pool": name}
    kube_cluster.save()
    GpuCapacity.objects.filter(cluster=kube_cluster).update(admin_cap=6)
    add(gpus=8)

    sync_cluster_inventory(cluster_id=kube_cluster.pk)

    row = GpuCapacity.objects.get(cluster=kube_cluster, resource_name="nvidia.com/gpu")
    assert (row.allocatable, row.admin_cap, row.capacity) == (8, 6, 6)


def test_the_periodic_sync_runs_in_the_worker_for_every_reachable_cluster(
    celery_worker_process, devcluster, pool, kube_cluster
):
    name, add, _ = pool
    kube_cluster.gpu_node_selector = {"hardware-type": "gpu", "pool": name}
    kube_cluster.save()
    unreachable = factories.ClusterFactory(name="no-kubeconfig")
    factories.GpuCapacityFactory(cluster=unreachable, allocatable=16)
    add(gpus=8)

    sync_all_inventories.delay()

    wait_for(lambda: capacity(kube_cluster) == 8, what="the worker's inventory sync")
    assert capacity(unreachable) == 16  # no credentials: what the admin entered stays


def test_a_node_that_goes_not_ready_no_longer_counts(devcluster, pool, kube_cluster, core):
    name, add, _ = pool
    kube_cluster.gpu_node_selector = {"hardware-type": "gpu", "pool": name}
    kube_cluster.save()
    node = add(gpus=8)
    sync_cluster_inventory(cluster_id=kube_cluster.pk)
    assert capacity(kube_cluster) == 8

    # Take the node from kwok (which would keep it Ready) and report it NotReady, as a kubelet
    # that lost its GPUs' host would.
    core.patch_node(node, {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}})
    conditions = core.read_node_status(node).status.conditions
    not_ready = [
        {
            "type": c.type,
            "status": "False" if c.type == "Ready" else c.status,
            "reason": "KubeletNotReady" if c.type == "Ready" else c.reason,
            "lastHeartbeatTime": c.last_heartbeat_time.isoformat(),
            "lastTransitionTime": c.last_transition_time.isoformat(),
        }
        for c in conditions
    ]
    core.patch_node_status(node, {"status": {"conditions": not_ready}})

    sync_cluster_inventory(cluster_id=kube_cluster.pk)

    assert capacity(kube_cluster) == 0
    # The model stays, at 0, while a node of it is there.
    row = GpuModelCapacity.objects.get(cluster=kube_cluster, gpu_model="NVIDIA-H100-80GB-HBM3")
    assert (row.allocatable, row.nodes, row.max_per_node) == (0, 0, 0)


def test_each_gpu_model_gets_its_gpus_nodes_and_largest_node(devcluster, pool, kube_cluster):
    name, add, added = pool
    kube_cluster.gpu_node_selector = {"hardware-type": "gpu", "pool": name}
    kube_cluster.save()
    add(gpus=8)
    small = add(gpus=4)
    add(gpus=2, gpu_model="NVIDIA-A100-SXM4-80GB")

    sync_cluster_inventory(cluster_id=kube_cluster.pk)

    rows = GpuModelCapacity.objects.filter(cluster=kube_cluster).order_by("gpu_model")
    assert [(r.gpu_model, r.allocatable, r.nodes, r.max_per_node) for r in rows] == [
        ("NVIDIA-A100-SXM4-80GB", 2, 1, 2),
        ("NVIDIA-H100-80GB-HBM3", 12, 2, 8),
    ]
    assert capacity(kube_cluster) == 14

    devcluster.remove_node(small)
    added.remove(small)
    sync_cluster_inventory(cluster_id=kube_cluster.pk)

    h100 = GpuModelCapacity.objects.get(cluster=kube_cluster, gpu_model="NVIDIA-H100-80GB-HBM3")
    assert (h100.allocatable, h100.nodes, h100.max_per_node) == (8, 1, 8)
