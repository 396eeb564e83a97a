"""The capacity sync: the portal's GPU capacity rows follow what the cluster's nodes offer.

The one change to clusters that comes from the clusters themselves. What the nodes offer is
``clusters.inventory``'s arithmetic; this writes it into ``GpuCapacity`` (per GPU kind, beside
the cap an admin sets) and ``GpuModelCapacity`` (per GPU model of each kind: what per-model
quota and Kueue's flavors plan with) under the cluster's row lock, and tells the apps above
(``clusters.signals.capacity_changed``) when anything changed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from clusters.inventory import (
    gpu_inventory,
    gpu_model_inventory,
    list_gpu_nodes,
    shared_gpu_replicas,
)
from clusters.kube import KubeClient
from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from clusters.signals import capacity_changed

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CapacityChange:
    """One GPU kind's allocatable GPUs before (None: new) and after; with ``gpu_model`` set, one
    model's of that kind (``after`` None: no node carries the model any more)."""

    resource_name: str
    before: int | None
    after: int | None
    gpu_model: str = ""


def capacity_sync(*, cluster: Cluster, kube: KubeClient | None = None) -> list[CapacityChange]:
    """Set each GPU kind's ``allocatable`` to what the cluster's Ready GPU nodes offer now, and
    each GPU model's figures (allocatable, nodes, most per node, replicas of a shared GPU)
    likewise; and the cluster's record of its shared nodes' replicas (``shared_gpu_replicas``).

    Nodes are those matching the cluster's GPU node selector. Kinds no node offers any more drop
    to 0 (their rows stay, with the admin's cap); kinds seen for the first time get a row. The
    admin's cap is never touched: capacity stays the lower of the two. A model's row stays while
    any node carries the model (at 0 while none is usable) and goes with the last such node.
    Returns what changed (kinds first, then models).
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
        model_changes = _sync_models(locked, nodes, known=rows)
        shared = shared_gpu_replicas(nodes)
        if shared != locked.shared_gpu_replicas:
            # What the GPU metrics weigh each shared GPU's series by (``metrics_config``).
            Cluster.objects.filter(pk=locked.pk).update(shared_gpu_replicas=shared)
        changes += model_changes
        if changes:
            capacity_changed.send(
                sender=Cluster,
                cluster_id=locked.pk,
                models_changed=any(c.before is None or c.after is None for c in model_changes),
            )
    for change in changes:
        logger.info(
            "cluster %s: %s%s allocatable %s -> %s",
            cluster.name,
            change.resource_name,
            f" ({change.gpu_model})" if change.gpu_model else "",
            change.before,
            change.after,
        )
    return changes


def _sync_models(cluster: Cluster, nodes: list[dict], *, known) -> list[CapacityChange]:
    """Bring the cluster's ``GpuModelCapacity`` rows in line with the nodes; the caller holds
    the cluster's row lock."""
    found = gpu_model_inventory(nodes, model_label=cluster.gpu_model_label, known_resources=known)
    rows = {(r.resource_name, r.gpu_model): r for r in cluster.gpu_model_capacities.all()}
    changes = []
    for key in sorted(set(rows) | set(found)):
        row, seen = rows.get(key), found.get(key)
        name, model = key
        if seen is None:
            row.delete()
            changes.append(CapacityChange(name, row.allocatable, None, gpu_model=model))
            continue
        figures = {
            "allocatable": seen.allocatable,
            "nodes": seen.nodes,
            "max_per_node": seen.max_per_node,
            "replicas": seen.replicas,
        }
        if row is None:
            GpuModelCapacity.objects.create(
                cluster=cluster, resource_name=name, gpu_model=model[:200], **figures
            )
            changes.append(CapacityChange(name, None, seen.allocatable, gpu_model=model))
        elif any(getattr(row, field) != value for field, value in figures.items()):
            GpuModelCapacity.objects.filter(pk=row.pk).update(**figures, updated_at=timezone.now())
            changes.append(CapacityChange(name, row.allocatable, seen.allocatable, gpu_model=model))
    return changes
