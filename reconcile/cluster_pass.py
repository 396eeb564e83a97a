"""Bring a cluster's cluster-wide objects in line with the database: the admission policies
that hold the portal's rules for everything in the namespaces it manages
(``reconcile.admission_policies``), always, and in Kueue mode the ResourceFlavors of its GPU
models, the WorkloadPriorityClasses and the cohort tree of its departments
(``reconcile.queue_manifests``).

Level-triggered like the team reconcile (``reconcile.team_pass``): a pass builds what the cluster
should hold from the database as it is now (its GPU placement, allowed registries, quota mode
GPU models and the departments of its teams), lists the kinds, applies what differs with
server-side apply and deletes what the portal made and no longer wants (a model whose last node
went, a department none of the cluster's teams is in any more, or every Kueue object once the
cluster is back in quota only mode). It is asked for when a cluster's settings change, when the
mode is switched, when the capacity sync sees the nodes change and when a team changes
department or a department moves (``tenants.departments``); a team's pass runs it
first on a cluster whose policies are not there yet; the periodic sweep runs it for every
cluster, so hand edits are repaired. Objects without the portal's label are never touched; one
with a name the portal wants stops the pass with ``NotOwned``.

Passes for one cluster are serialised by an advisory lock, like a team's; the outcome is
written to the cluster's ``ClusterState``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.image_references import registry_entries
from clusters.kube import KubeClient, KubeError, NotFound, NotOwned, describe
from clusters.models import Cluster, QuotaMode
from reconcile import manifests, queue_manifests
from reconcile.admission_policies import admission_objects
from reconcile.admission_policies.rules import ClusterRules, cluster_rules
from reconcile.desired_state import kueue_cluster_state
from reconcile.namespace_sync import being_deleted, kueue_missing, list_queue_kind
from reconcile.passes import Outcome, each, finish, lock, queues_applied_after, record
from tenants import department_tree
from tenants.models import ClusterState, Department, Team
from tenants.selectors import cluster_team_ids, department_parents

ADMISSION_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
QUEUE_CLUSTER_KINDS = ("ResourceFlavor", "WorkloadPriorityClass", "Cohort")
# First key of the advisory locks of cluster passes (team passes use ``reconcile_passes``'s).
ADVISORY_LOCK_CLASS = 0x6763  # "gc"


def sync_cluster_objects(
    kube: KubeClient, desired: list[dict], *, portal_name: str, queues: bool = False
) -> Outcome:
    """Make the cluster hold ``desired`` among the portal's cluster-wide objects: its admission
    policies, and with ``queues`` its Kueue objects too (read, and pruned unless desired).

    Each kind is listed whole (a cluster has few of them), so that an object of a wanted name
    made by someone else is found and left alone.
    """
    outcome = Outcome()
    wants_queues = any(obj["kind"] in QUEUE_CLUSTER_KINDS for obj in desired)
    kinds = [*ADMISSION_KINDS, *(QUEUE_CLUSTER_KINDS if queues else ())]
    live: dict[tuple, dict] = {}
    foreign: dict[tuple, dict] = {}
    for kind, items in zip(kinds, each(_list_all(kube), kinds), strict=True):
        if items is None:
            if wants_queues:
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
                "it before the portal can manage the cluster."
            )
        try:
            kube.apply(obj)
        except NotFound as error:
            if kind in QUEUE_CLUSTER_KINDS:
                raise kueue_missing(kube, kind) from error
            raise
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
    if queues:
        outcome.queues = wants_queues
    return outcome


def _list_all(kube: KubeClient):
    def read(kind: str) -> list[dict] | None:
        if kind in QUEUE_CLUSTER_KINDS:
            return list_queue_kind(kube, kind, label_selector=None)
        return kube.list(kind)

    return read


def admission_rules(cluster: Cluster) -> ClusterRules:
    """What the cluster's admission policies are made of, as its row holds it."""
    return cluster_rules(
        portal_name=settings.PORTAL_NAME,
        gpu_node_selector={
            str(key): str(value) for key, value in (cluster.gpu_node_selector or {}).items()
        },
        gpu_taint_key=cluster.gpu_taint_key,
        allowed_registries=registry_entries(cluster.allowed_registries or []),
        allow_all_registries=cluster.allow_all_registries,
        allowed_priority_classes=cluster.allowed_priority_classes or [],
        apps_domain=cluster.apps_domain,
        kueue=cluster.quota_mode == QuotaMode.KUEUE,
        portal_url=settings.PORTAL_BASE_URL,
    )


def cluster_departments(cluster: Cluster) -> dict[str, str]:
    """The departments that need a cohort on the cluster, slug -> its parent's slug ("" at the
    top): those the cluster's live teams are in, and every department above them."""
    in_use = set(
        Team.objects.filter(
            pk__in=cluster_team_ids(cluster_id=cluster.pk),
            archived_at__isnull=True,
            department__isnull=False,
        ).values_list("department_id", flat=True)
    )
    parents = department_parents()
    needed = {
        pk for department_id in in_use for pk in department_tree.chain(department_id, parents)
    }
    slugs = dict(Department.objects.filter(pk__in=needed).values_list("pk", "slug"))
    return {slugs[pk]: slugs.get(parents.get(pk), "") for pk in needed}


def desired_cluster_objects(cluster: Cluster, *, kueue_mode: bool) -> list[dict]:
    """Everything cluster-wide the cluster should hold for the portal."""
    desired = admission_objects(admission_rules(cluster))
    if kueue_mode:
        desired += queue_manifests.cluster_objects(
            kueue_cluster_state(cluster), departments=cluster_departments(cluster)
        )
    return desired


def reconcile_cluster(*, cluster_id: int, kube: KubeClient | None = None) -> Outcome:
    """One pass over the cluster's cluster-wide objects, its outcome recorded on
    ``ClusterState``. Raises the ``KubeError`` when the pass failed (after recording it).

    Kueue's kinds are read only in Kueue mode, or while the state says a Kueue-mode pass may
    have left some (``queues_applied``).
    """
    started = timezone.now()
    with transaction.atomic():
        state, _ = ClusterState.objects.get_or_create(cluster_id=cluster_id)
        lock(state.pk, lock_class=ADVISORY_LOCK_CLASS)
        cluster = Cluster.objects.get(pk=cluster_id)
        kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
        error: KubeError | None = None
        outcome = Outcome()
        client = kube
        try:
            client = kube or KubeClient.for_cluster(cluster)
            reads, writes = client.reads, client.writes
            desired = desired_cluster_objects(cluster, kueue_mode=kueue_mode)
            try:
                outcome = sync_cluster_objects(
                    client,
                    desired,
                    portal_name=settings.PORTAL_NAME,
                    queues=kueue_mode or state.queues_applied,
                )
            finally:
                outcome.reads, outcome.writes = client.reads - reads, client.writes - writes
        except KubeError as failure:
            error = failure
        changes = queues_applied_after(outcome=outcome, error=error, kueue_mode=kueue_mode)
        if error is None:
            changes["admission_applied_at"] = timezone.now()
        record(state, outcome=outcome, error=error, started=started, changes=changes)
    return finish(outcome, error, what=f"cluster {cluster.name}")
