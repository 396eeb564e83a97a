"""The capacity sync: the portal's GPU capacity rows follow what the cluster's nodes offer.

The one change to clusters that comes from the clusters themselves. What the nodes offer is
``clusters.inventory``'s arithmetic; this writes it into ``GpuCapacity`` under the cluster's
row lock, beside the cap an admin sets.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from clusters.inventory import gpu_inventory, list_gpu_nodes
from clusters.kube import KubeClient
from clusters.models import Cluster, GpuCapacity

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CapacityChange:
    resource_name: str
    before: int | None
    after: int


def capacity_sync(*, cluster: Cluster, kube: KubeClient | None = None) -> list[CapacityChange]:
    """Set each GPU kind's ``allocatable`` to what the cluster's Ready GPU nodes offer now.

    Nodes are those matching the cluster's GPU node selector. Kinds no node offers any more drop
    to 0 (their rows stay, with the admin's cap); kinds seen for the first time get a row. The
    admin's cap is never touched: capacity stays the lower of the two. Returns what changed.
    """
    kube = kube or KubeClient.for_cluster(cluster)
    nodes = list_gpu_nodes(kube, cluster)
    with transaction.atomic():
        # Lock the cluster row, as approvals do: an approval must check against either the old
        # or the new capacity, never a mix. FOR NO KEY UPDATE still waits for an approval's FOR
        # UPDATE, but not for the foreign key check of a row another writer adds for this
        # cluster meanwhile (an admin adding a GPU kind): under FOR UPDATE that writer's commit
        # waited for this lock while the insert below waited for its row, a deadlock.
        locked = Cluster.objects.select_for_update(no_key=True).get(pk=cluster.pk)
        rows = {row.resource_name: row for row in GpuCapacity.objects.filter(cluster=locked)}
        kinds = gpu_inventory(nodes, model_label=locked.gpu_model_label, known_resources=rows)
        changes = []
        for name in sorted(set(rows) | set(kinds)):
            row, kind = rows.get(name), kinds.get(name)
            allocatable = kind.allocatable if kind else 0
            model = kind.gpu_model if kind and kind.models else (row.gpu_model if row else "")
            if row is None:
                # Another writer may have added the kind since the read: update its row then.
                GpuCapacity.objects.bulk_create(
                    [
                        GpuCapacity(
                            cluster=locked,
                            resource_name=name,
                            allocatable=allocatable,
                            gpu_model=model,
                        )
                    ],
                    update_conflicts=True,
                    unique_fields=["cluster", "resource_name"],
                    update_fields=["allocatable", "gpu_model", "updated_at"],
                )
                changes.append(CapacityChange(name, None, allocatable))
            elif row.allocatable != allocatable or row.gpu_model != model:
                GpuCapacity.objects.filter(pk=row.pk).update(
                    allocatable=allocatable, gpu_model=model, updated_at=timezone.now()
                )
                changes.append(CapacityChange(name, row.allocatable, allocatable))
    for change in changes:
        logger.info(
            "cluster %s: %s allocatable %s -> %s",
            cluster.name,
            change.resource_name,
            change.before,
            change.after,
        )
    return changes
