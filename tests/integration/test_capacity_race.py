"""The capacity sync against another writer of the same capacity row: an admin adding the GPU
kind in the Django admin (or the demo's seed) takes no lock on the cluster's row, so the sync can
read no row for the kind and then meet the other writer's row when it inserts. It must update
that row rather than fail on the unique constraint."""

import threading

import pytest
from django.db import connections, transaction

from clusters.capacity import capacity_sync
from clusters.kube import KubeClient
from clusters.models import GpuCapacity
from tests import factories
from tests.integration.conftest import backend_pid, wait_for, waiting_for_a_lock

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

GPU = "nvidia.com/gpu"


def test_a_sync_that_meets_a_row_added_meanwhile_updates_it(devcluster):
    cluster = factories.ClusterFactory(name="dev", kubeconfig_path=str(devcluster.kubeconfig))
    kube = KubeClient.from_kubeconfig(devcluster.kubeconfig, cluster_name="dev")
    added, commit = threading.Event(), threading.Event()
    outcome: dict = {}

    def admin_adds_the_kind():
        try:
            with transaction.atomic():
                GpuCapacity.objects.create(cluster=cluster, resource_name=GPU, allocatable=16)
                added.set()
                commit.wait(timeout=30)
        finally:
            connections.close_all()

    def sync():
        try:
            outcome["pid"] = backend_pid()
            outcome["changes"] = capacity_sync(cluster=cluster, kube=kube)
        except Exception as error:
            outcome["error"] = error
        finally:
            connections.close_all()

    admin = threading.Thread(target=admin_adds_the_kind)
    admin.start()
    assert added.wait(timeout=30)
    syncing = threading.Thread(target=sync)
    syncing.start()
    # The sync read no row for the kind and now waits on the admin's uncommitted insert.
    wait_for(
        lambda: "error" in outcome or ("pid" in outcome and waiting_for_a_lock(outcome["pid"])),
        interval=0.05,
        what="the sync to wait for the admin's row",
    )
    commit.set()
    admin.join(timeout=30)
    syncing.join(timeout=60)

    assert "error" not in outcome, outcome["error"]
    (row,) = GpuCapacity.objects.filter(cluster=cluster, resource_name=GPU)
    assert row.allocatable >= 48  # the devcluster's GPU nodes, not the admin's 16
    # One change for the kind (the sync had read no row for it); the models' changes follow.
    assert [c.resource_name for c in outcome["changes"] if not c.gpu_model] == [GPU]
