"""Bring a cluster's cluster-wide Kueue objects in line with the database: the ResourceFlavors
of its GPU models and the WorkloadPriorityClasses (``tenants.queue_manifests``).

Level-triggered like the team reconcile (``tenants.reconcile``): a pass builds what the cluster
should hold from the database as it is now (its quota mode and GPU models), lists the kinds,
applies what differs with server-side apply and deletes what the portal made and no longer
wants (a model whose last node went, or everything once the cluster is back in quota only
mode). It is asked for when the mode is switched and when the capacity sync sees the nodes
change, and the periodic sweep runs it for every cluster in Kueue mode, so hand edits are
repaired. Objects without the portal's label are never touched; one with a name the portal
wants stops the pass with ``NotOwned``.

Passes for one cluster are serialised by an advisory lock, like a team's; the outcome is
written to the cluster's ``ClusterState``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.kube import KubeClient, KubeError, NotFound, NotOwned, describe
from clusters.models import Cluster, QuotaMode
from tenants import manifests, queue_manifests
from tenants.models import ClusterState
from tenants.reconcile import (
    Outcome,
    being_deleted,
    each,
    finish,
    kueue_cluster_state,
    kueue_missing,
    list_queue_kind,
    lock,
    queues_applied_after,
    record,
)

CLUSTER_KINDS = ("ResourceFlavor", "WorkloadPriorityClass")
# First key of the advisory locks of cluster passes (team passes use ``reconcile``'s).
ADVISORY_LOCK_CLASS = 0x6763  # "gc"


def sync_cluster_objects(kube: KubeClient, desired: list[dict], *, portal_name: str) -> Outcome:
    """Make the cluster hold ``desired`` among the portal's cluster-wide Kueue objects.

    Each kind is listed whole (a cluster has few flavors and priority classes), so that an
    object of a wanted name made by someone else is found and left alone.
    """
    outcome = Outcome()
    live: dict[tuple, dict] = {}
    foreign: dict[tuple, dict] = {}
    for kind, items in zip(CLUSTER_KINDS, each(_list_all(kube), CLUSTER_KINDS), strict=True):
        if items is None:
            if desired:
                raise kueue_missing(kube, kind)
            continue
        for obj in items:
            owned = queue_manifests.is_cluster_owned(obj, portal_name=portal_name)
            (live if owned else foreign)[manifests.object_key(obj)] = obj

    def ensure(obj: dict) -> str | None:
        key = manifests.object_key(obj)
        kind, _, name = key
        current = live.get(key)
        if terminating := being_deleted(kube, current):
            raise terminating
        if current is not None and manifests.matches(obj, current):
            return None
        if key in foreign:
            raise NotOwned(
                f"{describe(kind, name)} on cluster {kube.cluster_name} was not created by the "
                "portal, so the portal leaves it alone. A cluster admin must delete or rename "
                "it before the portal can use Kueue there."
            )
        try:
            kube.apply(obj)
        except NotFound as error:
            raise kueue_missing(kube, kind) from error
        return describe(kind, name)

    outcome.applied = [what for what in each(ensure, desired) if what]
    wanted = {manifests.object_key(obj) for obj in desired}
    unwanted = [
        obj
        for key, obj in live.items()
        if key not in wanted and not obj["metadata"].get("deletionTimestamp")
    ]

    def prune(obj: dict) -> str:
        kind, _, name = manifests.object_key(obj)
        kube.delete(kind, name, uid=obj["metadata"].get("uid"))
        return describe(kind, name)

    outcome.deleted = each(prune, unwanted)
    outcome.queues = bool(desired)
    return outcome


def _list_all(kube: KubeClient):
    def read(kind: str) -> list[dict] | None:
        return list_queue_kind(kube, kind, label_selector=None)

    return read


def reconcile_cluster(*, cluster_id: int, kube: KubeClient | None = None) -> Outcome:
    """One pass over the cluster's cluster-wide objects, its outcome recorded on
    ``ClusterState``. Raises the ``KubeError`` when the pass failed (after recording it).

    A cluster in quota only mode whose state says nothing of the portal's can be there is
    settled without a request to it.
    """
    started = timezone.now()
    with transaction.atomic():
        state, _ = ClusterState.objects.get_or_create(cluster_id=cluster_id)
        lock(state.pk, lock_class=ADVISORY_LOCK_CLASS)
        cluster = Cluster.objects.get(pk=cluster_id)
        kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
        error: KubeError | None = None
        outcome = Outcome()
        if kueue_mode or state.queues_applied:
            client = kube
            try:
                client = kube or KubeClient.for_cluster(cluster)
                reads, writes = client.reads, client.writes
                desired = (
                    queue_manifests.cluster_objects(kueue_cluster_state(cluster))
                    if kueue_mode
                    else []
                )
                try:
                    outcome = sync_cluster_objects(
                        client, desired, portal_name=settings.PORTAL_NAME
                    )
                finally:
                    outcome.reads, outcome.writes = client.reads - reads, client.writes - writes
            except KubeError as failure:
                error = failure
        changes = queues_applied_after(outcome=outcome, error=error, kueue_mode=kueue_mode)
        record(state, outcome=outcome, error=error, started=started, changes=changes)
    return finish(outcome, error, what=f"cluster {cluster.name}")
