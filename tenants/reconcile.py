"""Bring one team's namespace on one cluster in line with the database, and say how it went.

Level-triggered: whatever woke it, a pass reads the team's grants and memberships as they are
now, builds the desired objects (``tenants.manifests``), compares them with what the cluster
holds under the portal's labels, applies only what differs (server-side apply, one field manager)
and deletes what the portal owns but no longer wants. A pass over an unchanged cluster makes
reads only: one GET of the namespace and one labelled LIST per kind.

On a cluster in Kueue mode the team's queues (``tenants.queue_manifests``) are among the
desired objects and the ResourceQuota is their ceiling. In quota only mode they are not, and a
pass lists them (to prune them) only while the team's row says a Kueue-mode pass may have left
some (``queues_applied``), so a quota only pass over an unchanged cluster reads no more than
before.

Passes for the same team and cluster are serialised by a PostgreSQL advisory lock taken before
the database is read: a pass that started from older grants can never overwrite what a later one
applied. (An advisory lock rather than a row lock: approvals update the ``TeamCluster`` row and
must not wait for a pass talking to a slow cluster.) The outcome (in sync, or the error in words;
when it last applied; what the quota holds) is written to that row, where the pages and the API
read it.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from clusters.kube import KINDS, Conflict, KubeClient, KubeError, NotFound, NotOwned, describe
from clusters.models import (
    Cluster,
    GpuCapacity,
    GpuModelCapacity,
    QuotaMode,
    object_limits_text,
)
from clusters.vocabulary import OBJECT_LIMIT_DEFAULTS
from tenants import manifests, queue_manifests
from tenants.models import (
    ClusterState,
    Membership,
    QuotaGrant,
    ReconcileState,
    Team,
    TeamCluster,
    TeamObjectLimits,
    TeamQueuePolicy,
)
from tenants.namespaces import NamespaceNotOwned, check_namespace_owned, reserved

logger = logging.getLogger(__name__)

NAMESPACED_KINDS = ("ResourceQuota", "LimitRange", "NetworkPolicy", "RoleBinding")
# A team's Kueue objects: its LocalQueues in the namespace, its ClusterQueues cluster-wide.
QUEUE_NAMESPACED_KINDS = ("LocalQueue",)
QUEUE_CLUSTER_KINDS = ("ClusterQueue",)
QUEUE_KINDS = (*QUEUE_CLUSTER_KINDS, *QUEUE_NAMESPACED_KINDS)
# Kinds a team has exactly one object of: read by name rather than listed.
SINGLE_OBJECT_KINDS = ("ResourceQuota", "LimitRange", "NetworkPolicy")
# Requests of one pass that may be in flight at once (they are independent of each other); the
# process's request pool holds this many for each pass a sweep runs at once.
MAX_CONCURRENT_REQUESTS = 4
# First key of the advisory locks that serialise reconcile passes (the second is the row's id).
ADVISORY_LOCK_CLASS = 0x6770  # "gp"


@dataclass
class Outcome:
    """What one pass did: objects applied and deleted, and the requests it made."""

    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    reads: int = 0
    writes: int = 0
    quota: dict = field(default_factory=dict)
    namespace_deleted: bool = False
    # Whether Kueue objects of the portal's are on the cluster after the pass (None: not read).
    queues: bool | None = None

    def as_dict(self) -> dict:
        return {
            "applied": self.applied,
            "deleted": self.deleted,
            "reads": self.reads,
            "writes": self.writes,
        }


def policy() -> manifests.Policy:
    return manifests.Policy(
        portal_name=settings.PORTAL_NAME,
        max_pods=settings.PORTAL_TEAM_MAX_PODS,
        default_cpu_request_millicores=settings.PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES,
        default_cpu_limit_millicores=settings.PORTAL_CONTAINER_DEFAULT_CPU_LIMIT_MILLICORES,
        default_memory_request_mib=settings.PORTAL_CONTAINER_DEFAULT_MEMORY_REQUEST_MIB,
        default_memory_limit_mib=settings.PORTAL_CONTAINER_DEFAULT_MEMORY_LIMIT_MIB,
    )


def kueue_cluster_state(cluster: Cluster) -> queue_manifests.KueueCluster:
    """What the cluster's Kueue objects are made of, as the database holds it now (two
    queries)."""
    capacities = list(GpuCapacity.objects.filter(cluster=cluster))
    models = GpuModelCapacity.objects.filter(cluster=cluster).values_list("gpu_model", flat=True)
    return queue_manifests.kueue_cluster(
        portal_name=settings.PORTAL_NAME,
        gpu_resources=[c.resource_name for c in capacities],
        gpu_models=models,
        gpu_node_selector=cluster.gpu_node_selector or {},
        gpu_taint_key=cluster.gpu_taint_key,
        gpu_model_label=cluster.gpu_model_label,
        gpu_capacity={c.resource_name: c.capacity for c in capacities},
    )


def queue_policy(*, team: Team, cluster: Cluster) -> queue_manifests.QueuePolicy:
    """The team's borrowing, lending and weight on the cluster (the defaults without a row)."""
    return queue_policies(team_ids=[team.pk], cluster=cluster).get(
        team.pk, queue_manifests.QueuePolicy()
    )


def queue_policies(
    *, team_ids: list[int], cluster: Cluster
) -> dict[int, queue_manifests.QueuePolicy]:
    """``queue_policy`` of the teams that have a row, by team id (one query)."""
    return {
        row.team_id: queue_manifests.QueuePolicy(
            borrowing_limit=row.borrowing_limit,
            lending_limit=row.lending_limit,
            fair_sharing_weight=row.fair_sharing_weight,
        )
        for row in TeamQueuePolicy.objects.filter(team_id__in=team_ids, cluster=cluster)
    }


@dataclass(frozen=True)
class QueueLimits:
    """What a team's queues on a Kueue-mode cluster hold, as the reconcile builds them: its own
    GPUs per (GPU kind, model) ("" for any model: the any-gpu flavor), the most its queues can
    ever admit per kind (the ResourceQuota's ceiling) and its policy. For the job side, to refuse
    up front a job that could never run."""

    own: dict[tuple[str, str], int]
    ceiling: dict[str, int]
    policy: queue_manifests.QueuePolicy


def team_queue_limits(*, team: Team, cluster: Cluster) -> QueueLimits:
    """The team's queue figures on the cluster from the database as it is now (whatever the
    cluster's mode: they are what Kueue mode gives it)."""
    state = team_state(team=team, cluster=cluster)
    kueue = kueue_cluster_state(cluster)
    policy = queue_policy(team=team, cluster=cluster)
    return QueueLimits(
        own=queue_manifests.own_gpus(state, kueue),
        ceiling=queue_manifests.quota_ceiling(state, kueue, policy),
        policy=policy,
    )


@dataclass(frozen=True)
class Desired:
    """What a pass should leave on the cluster for the team."""

    objects: list[dict]
    queues: bool  # Kueue mode: the team's queues are among the objects


def team_state(*, team: Team, cluster: Cluster) -> manifests.TeamOnCluster:
    """The team's state on the cluster as the database holds it now (three queries). Only
    active users are members on the cluster: deactivating a user drops them from every
    binding."""
    return team_states(teams=[team], cluster=cluster)[team.pk]


def team_states(
    *, teams: list[Team], cluster: Cluster, today: datetime.date | None = None
) -> dict[int, manifests.TeamOnCluster]:
    """``team_state`` of many teams at once, by team id: three queries whatever their number
    (a sweep over a cluster's teams reads the database once, not once a team). Grants are in
    effect from their first day to their last, as of ``today`` (default: the local date): a
    grant booked ahead reaches the cluster with the first pass on its first day."""
    ids = [team.pk for team in teams]
    grants: dict[int, list[manifests.Grant]] = {pk: [] for pk in ids}
    for g in QuotaGrant.objects.filter(
        team_id__in=ids, cluster=cluster, state=QuotaGrant.State.ACTIVE
    ).only(
        "team_id", "gpu_resource", "gpus", "starts_on", "ends_on", "cpu_cores", "memory_gib",
        "state", "gpu_model",
    ):  # fmt: skip
        grants[g.team_id].append(
            manifests.Grant(
                gpu_resource=g.gpu_resource,
                gpus=g.gpus,
                starts_on=g.starts_on,
                ends_on=g.ends_on,
                cpu_cores=g.cpu_cores,
                memory_gib=g.memory_gib,
                state=g.state,
                gpu_model=g.gpu_model,
            )
        )
    members: dict[int, list[manifests.Member]] = {pk: [] for pk in ids}
    for team_id, username, role in Membership.objects.filter(
        team_id__in=ids, user__is_active=True
    ).values_list("team_id", "user__username", "role"):
        members[team_id].append(manifests.Member(username=username, role=role))
    offered = list(
        GpuCapacity.objects.filter(cluster=cluster).values_list("resource_name", flat=True)
    )
    today = today or timezone.localdate()
    cluster_limits = {**OBJECT_LIMIT_DEFAULTS, **object_limits_text(cluster.object_limits or {})}
    team_limits = {
        team_id: object_limits_text(limits or {})
        for team_id, limits in TeamObjectLimits.objects.filter(
            team_id__in=ids, cluster=cluster
        ).values_list("team_id", "limits")
    }
    return {
        team.pk: manifests.team_on_cluster(
            slug=team.slug,
            today=today,
            gpu_resources=offered,
            grants=grants[team.pk],
            members=members[team.pk],
            user_prefix=cluster.user_prefix,
            archived=team.archived_at is not None,
            pod_security_level=cluster.pod_security_level,
            external_services=team.external_services_allowed,
            object_limits={**cluster_limits, **team_limits.get(team.pk, {})},
        )
        for team in teams
    }


def admission_in_place(cluster: Cluster) -> bool:
    """Whether the cluster's admission policies have been applied (members are bound in a
    team namespace only then: the guard rails come before the access)."""
    return ClusterState.objects.filter(cluster=cluster, admission_applied_at__isnull=False).exists()


def put_admission_in_place(*, cluster: Cluster, kube: KubeClient) -> KubeError | None:
    """Run the cluster's own pass now (its admission policies; in Kueue mode its flavors too),
    so that a team pass on a cluster without them binds its members in the same pass. The
    cluster pass's error when it failed (recorded on the cluster's state)."""
    from tenants.cluster_reconcile import reconcile_cluster  # it builds on this module

    try:
        reconcile_cluster(cluster_id=cluster.pk, kube=kube)
    except KubeError as error:
        return error
    return None


def desired_state(
    *,
    team: Team,
    cluster: Cluster,
    rules: manifests.Policy,
    state: manifests.TeamOnCluster | None = None,
    kueue: queue_manifests.KueueCluster | None = None,
    queue_rules: queue_manifests.QueuePolicy | None = None,
    admission: bool | None = None,
) -> Desired:
    """Everything the team should have on the cluster: in Kueue mode its queues too, with the
    ResourceQuota at their ceiling. No member is bound while the cluster's admission policies
    are not in place.

    What is not given is read from the database now (a sweep reads it once for all teams and
    gives it: ``state``, ``kueue``, ``queue_rules``, ``admission``)."""
    if state is None:
        state = team_state(team=team, cluster=cluster)
    kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
    if kueue_mode:
        kueue = kueue_cluster_state(cluster) if kueue is None else kueue
        policy = queue_policy(team=team, cluster=cluster) if queue_rules is None else queue_rules
        ceiling = queue_manifests.quota_ceiling(state, kueue, policy)
        state = replace(state, gpu_ceiling=tuple(sorted(ceiling.items())))
    objects = manifests.desired_objects(state, rules)
    if kueue_mode:
        objects += queue_manifests.team_queue_objects(
            state, kueue, policy, rules, department=department_slug(team)
        )
    if not (admission_in_place(cluster) if admission is None else admission):
        objects = [obj for obj in objects if obj["kind"] != "RoleBinding"]
    return Desired(objects, queues=kueue_mode)


def department_slug(team: Team) -> str:
    """The slug of the team's department, whose cohort its queues are in ("" for none)."""
    return team.department.slug if team.department_id else ""


# --- talking to the cluster --------------------------------------------------------------------


def each(function, items: list) -> list:
    """``function`` over independent requests at once: a pass costs about as long as its
    slowest request rather than their sum. The first error is raised (after all finished).

    The requests run on one pool per process, kept for its life: a sweep makes thousands of
    passes, and starting threads for each cost more than its requests' own work. ``function``
    must not itself call ``each`` (it would wait on the pool it runs in)."""
    if len(items) <= 1:
        return [function(item) for item in items]
    return list(_request_pool().map(function, items))


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _request_pool() -> ThreadPoolExecutor:
    """This process's pool (a forked worker child makes its own: threads do not survive a
    fork). Sized for a sweep's passes side by side, each with a few requests in flight."""
    pid = os.getpid()
    with _pools_lock:
        pool = _pools.get(pid)
        if pool is None:
            workers = MAX_CONCURRENT_REQUESTS * max(1, settings.PORTAL_RECONCILE_SWEEP_CONCURRENCY)
            pool = _pools[pid] = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="reconcile-request"
            )
        return pool


def list_queue_kind(
    kube: KubeClient, kind: str, *, namespace: str | None = None, label_selector: str | None
) -> list[dict] | None:
    """The Kueue objects of a kind that match the selector; None when the cluster does not
    serve the kind (Kueue is not installed)."""
    try:
        return kube.list(kind, namespace=namespace, label_selector=label_selector)
    except NotFound:
        return None


def being_deleted(kube: KubeClient, live: dict | None) -> KubeError | None:
    """A Kueue object the portal wants that is still being deleted (a ClusterQueue waits for
    the workloads it admitted, a flavor for the queues that use it): applying it would not stop
    that, so the pass is retried until it is gone and can be made again."""
    if live is None or not (live.get("metadata") or {}).get("deletionTimestamp"):
        return None
    kind, namespace, name = manifests.object_key(live)
    return Conflict(
        f"{describe(kind, name, namespace or None)} on cluster {kube.cluster_name} is being "
        "deleted (Kueue keeps it while it is in use); the portal makes it again once it is "
        "gone, and tries until then."
    )


def kueue_missing(kube: KubeClient, kind: str) -> KubeError:
    return KubeError(
        f"Kueue is not installed on cluster {kube.cluster_name}: it does not serve "
        f"{KINDS[kind].api_version} {KINDS[kind].plural}. Install Kueue v0.17 or later there, or "
        "switch the cluster back to quota only."
    )


def sync(
    kube: KubeClient,
    desired: list[dict],
    *,
    slug: str,
    rules: manifests.Policy,
    queues: bool = False,
) -> Outcome:
    """Make the cluster hold ``desired`` for the team, touching only objects the portal owns.

    With ``queues`` the team's Kueue objects are read as well (and pruned unless desired).
    Raises ``NotOwned`` when the namespace (``NamespaceNotOwned``), or an object the portal would
    create, already exists without the portal's labels: someone else made it, and it is left
    alone.
    """
    outcome = Outcome()
    wants_queues = any(obj["kind"] in QUEUE_KINDS for obj in desired)
    namespace = slug
    live_namespace = check_namespace_owned(kube, slug=slug, rules=rules)
    live: dict[tuple, dict] = {}  # the portal's objects for the team, by (kind, namespace, name)
    foreign: dict[tuple, dict] = {}  # objects with a name the portal wants, made by someone else
    read_by_name: set[tuple] = set()
    if live_namespace is not None:
        live[manifests.object_key(live_namespace)] = live_namespace
        # A namespace that does not exist yet holds nothing: only an existing one is read.
        # A kind the team has one object of is read by name: a GET costs the API server less
        # than a LIST, and finds an object of that name whoever made it. Kinds whose objects
        # come and go (RoleBindings) are listed by the portal's labels, to find what to prune.
        selector = manifests.ownership_selector(slug, rules)
        names: dict[str, list[str]] = {}
        for obj in desired:
            names.setdefault(obj["kind"], []).append(obj["metadata"]["name"])

        def read(kind: str) -> list[dict]:
            if kind in SINGLE_OBJECT_KINDS and len(names.get(kind, [])) == 1:
                found = kube.get(kind, names[kind][0], namespace)
                read_by_name.add((kind, namespace, names[kind][0]))
                return [found] if found is not None else []
            if kind in QUEUE_KINDS:
                found = list_queue_kind(kube, kind, namespace=namespace, label_selector=selector)
                if found is None and wants_queues:
                    raise kueue_missing(kube, kind)
                return found or []
            return kube.list(kind, namespace=namespace, label_selector=selector)

        kinds = [*NAMESPACED_KINDS, *(QUEUE_NAMESPACED_KINDS if queues else ())]
        for items in each(read, kinds):
            for obj in items:
                owned = manifests.is_owned(obj, slug=slug, policy=rules)
                (live if owned else foreign)[manifests.object_key(obj)] = obj
    if queues:
        # The team's ClusterQueues are cluster-wide: they may be there whether or not the
        # namespace is.
        for kind in QUEUE_CLUSTER_KINDS:
            found = list_queue_kind(
                kube, kind, label_selector=manifests.ownership_selector(slug, rules)
            )
            if found is None and wants_queues:
                raise kueue_missing(kube, kind)
            for obj in found or []:
                live[manifests.object_key(obj)] = obj

    def ensure(obj: dict) -> str | None:
        """Apply the object unless the cluster already holds it; what was applied, if anything."""
        key = manifests.object_key(obj)
        kind, obj_namespace, name = key
        current = live.get(key)
        may_exist = live_namespace is not None or not KINDS[kind].namespaced
        unread = kind != "Namespace" and may_exist and key not in read_by_name
        if current is None and unread:
            # Not among the portal's listed objects: make sure nobody else's has the name.
            found = kube.get(kind, name, obj_namespace)
            if found is not None and manifests.is_owned(found, slug=slug, policy=rules):
                current = found
            elif found is not None:
                foreign[key] = found
        if kind in QUEUE_KINDS and (terminating := being_deleted(kube, current)):
            raise terminating
        if current is not None and manifests.matches(obj, current):
            return None
        if key in foreign:
            raise NotOwned(
                f"{describe(kind, name, obj_namespace)} on cluster {kube.cluster_name} was "
                "not created by the portal, so the portal leaves it alone. A cluster admin "
                f"must delete it before the portal can manage the team's {kind} there."
            )
        try:
            kube.apply(obj)
        except NotFound as error:
            if kind in QUEUE_KINDS and error.details.get("kind") != "namespaces":
                raise kueue_missing(kube, kind) from error
            raise
        return describe(kind, name, obj_namespace or None)

    # The namespace first: what goes inside needs it.
    namespaces = [obj for obj in desired if obj["kind"] == "Namespace"]
    inside = [obj for obj in desired if obj["kind"] != "Namespace"]
    applied = [ensure(obj) for obj in namespaces] + each(ensure, inside)
    outcome.applied = [what for what in applied if what]

    wanted = {manifests.object_key(obj) for obj in desired}
    unwanted = [
        obj
        for key, obj in live.items()
        if key not in wanted
        and key[0] != "Namespace"
        and not obj["metadata"].get("deletionTimestamp")
    ]

    def prune(obj: dict) -> str:
        kind, obj_namespace, name = manifests.object_key(obj)
        kube.delete(kind, name, obj_namespace, uid=obj["metadata"].get("uid"))
        return describe(kind, name, obj_namespace)

    outcome.deleted = each(prune, unwanted)
    for obj in desired:
        if obj["kind"] == "ResourceQuota":
            outcome.quota = dict(obj["spec"]["hard"])
    if queues:
        outcome.queues = wants_queues
    return outcome


def prune_cluster_queues(kube: KubeClient, *, slug: str, rules: manifests.Policy) -> list[str]:
    """Delete the team's ClusterQueues (they are not in its namespace, so deleting that does
    not remove them); what was deleted."""
    deleted = []
    for kind in QUEUE_CLUSTER_KINDS:
        selector = manifests.ownership_selector(slug, rules)
        for obj in list_queue_kind(kube, kind, label_selector=selector) or []:
            _, _, name = manifests.object_key(obj)
            if kube.delete(kind, name, uid=obj["metadata"].get("uid")):
                deleted.append(describe(kind, name))
    return deleted


def delete_namespace(kube: KubeClient, *, slug: str, rules: manifests.Policy) -> Outcome:
    """Delete the team's namespace, and everything in it, if the portal created it, and the
    team's ClusterQueues."""
    outcome = Outcome(namespace_deleted=True, queues=False)
    outcome.deleted = prune_cluster_queues(kube, slug=slug, rules=rules)
    live = kube.get("Namespace", slug)
    if live is None:
        return outcome
    if not manifests.is_owned(live, slug=slug, policy=rules):
        raise NamespaceNotOwned(
            f"Namespace {slug} on cluster {kube.cluster_name} was not created by the portal; "
            "it is not deleted."
        )
    if live.get("metadata", {}).get("deletionTimestamp"):
        return outcome  # already going
    kube.delete("Namespace", slug, uid=live["metadata"].get("uid"))
    outcome.deleted.append(describe("Namespace", slug))
    return outcome


# --- one pass, recorded ------------------------------------------------------------------------


def reconcile_team_on_cluster(
    *,
    team_id: int,
    cluster_id: int,
    kube: KubeClient | None = None,
    today: datetime.date | None = None,
) -> Outcome:
    """One reconcile pass of the team on the cluster, its outcome recorded on ``TeamCluster``.

    Raises the ``KubeError`` when the pass failed (after recording it), so the task can retry
    transient ones.
    """
    result = reconcile_teams_on_cluster(
        team_ids=[team_id], cluster_id=cluster_id, kube=kube, today=today
    )
    if team_id not in result:
        raise TeamCluster.DoesNotExist(f"team {team_id} or cluster {cluster_id} does not exist")
    return finish(*result[team_id])


def reconcile_teams_on_cluster(
    *,
    team_ids: list[int],
    cluster_id: int,
    kube: KubeClient | None = None,
    concurrency: int = 1,
    today: datetime.date | None = None,
) -> dict[int, tuple[Outcome, KubeError | None, str]]:
    """A reconcile pass of each team on the cluster, each outcome recorded on its
    ``TeamCluster``; by team id, each pass's outcome, its error (None when it succeeded) and what
    it was of (for ``finish``). A team that no longer exists has no entry.

    The passes share one transaction: their advisory locks are taken together (in id order, so
    two such batches cannot deadlock), the database is read once for all of them after that,
    and ``concurrency`` of them talk to the cluster at once. Each team's own pass is this with
    one team; a sweep batches many, which spares it most of the per-pass database work.
    """
    started = timezone.now()
    results: dict[int, tuple[Outcome, KubeError | None, str]] = {}
    with transaction.atomic():
        present = set(
            TeamCluster.objects.filter(team_id__in=team_ids, cluster_id=cluster_id).values_list(
                "team_id", flat=True
            )
        )
        for team_id in set(team_ids) - present:
            TeamCluster.objects.get_or_create(team_id=team_id, cluster_id=cluster_id)
        pks = sorted(
            TeamCluster.objects.filter(team_id__in=team_ids, cluster_id=cluster_id).values_list(
                "pk", flat=True
            )
        )
        # Serialise passes for these teams and this cluster, and only then read the database:
        # the rows, the teams and the cluster as they are now.
        lock_all(pks)
        states = list(
            TeamCluster.objects.select_related("team", "team__department", "cluster")
            .filter(pk__in=pks)
            .order_by("pk")
        )
        if not states:  # the teams or the cluster are gone
            return results
        cluster = states[0].cluster
        rules = policy()
        kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
        client = kube
        setup_error: KubeError | None = None
        admission = admission_in_place(cluster)
        try:
            client = kube or KubeClient.for_cluster(cluster)
        except KubeError as failure:
            setup_error = failure
        # No member is bound where the cluster's admission policies are not in place: put
        # them there first. If that fails the rest is applied all the same, without bindings,
        # and each pass ends with the cluster's error (retried like any other).
        policies_error = None
        if setup_error is None and not admission and any(not deleting(s) for s in states):
            policies_error = put_admission_in_place(cluster=cluster, kube=client)
            admission = policies_error is None
        teams = [state.team for state in states]
        team_state_now = team_states(teams=teams, cluster=cluster, today=today)
        kueue = kueue_cluster_state(cluster) if kueue_mode else None
        queue_rules = queue_policies(team_ids=[team.pk for team in teams], cluster=cluster)

        def one(state: TeamCluster) -> tuple[Outcome, KubeError | None]:
            if setup_error is not None:
                return Outcome(), setup_error
            team = state.team
            part = client.counting_apart()
            outcome = Outcome()
            try:
                try:
                    if deleting(state):
                        outcome = delete_namespace(part, slug=team.slug, rules=rules)
                    elif team.slug in (cluster.reserved_namespaces or []):
                        raise reserved(slug=team.slug, cluster_name=cluster.name)
                    else:
                        desired = desired_state(
                            team=team,
                            cluster=cluster,
                            rules=rules,
                            state=team_state_now[team.pk],
                            kueue=kueue,
                            queue_rules=queue_rules.get(team.pk, queue_manifests.QueuePolicy()),
                            admission=admission,
                        )
                        outcome = sync(
                            part,
                            desired.objects,
                            slug=team.slug,
                            rules=rules,
                            queues=desired.queues or state.queues_applied,
                        )
                finally:
                    outcome.reads, outcome.writes = part.reads, part.writes
                if policies_error is not None:
                    raise policies_error
            except KubeError as failure:
                return outcome, failure
            return outcome, None

        if concurrency > 1 and len(states) > 1:
            with ThreadPoolExecutor(
                max_workers=min(concurrency, len(states)), thread_name_prefix="reconcile-pass"
            ) as pool:
                passes = list(pool.map(one, states))
        else:
            passes = [one(state) for state in states]
        for state, (outcome, error) in zip(states, passes, strict=True):
            changes = queues_applied_after(outcome=outcome, error=error, kueue_mode=kueue_mode)
            if error is None and not outcome.namespace_deleted:
                changes.update(applied_quota=outcome.quota, namespace_owned=True)
            elif isinstance(error, NamespaceNotOwned):
                changes["namespace_owned"] = False
            # Any other failure says nothing new about whose the namespace is.
            record(state, outcome=outcome, error=error, started=started, changes=changes)
            results[state.team_id] = (outcome, error, f"{state.team.slug} on {cluster.name}")
    return results


def deleting(state: TeamCluster) -> bool:
    """Whether the pass deletes the team's namespace (archived, and asked to)."""
    return state.team.archived_at is not None and bool(state.namespace_delete_requested_at)


def queues_applied_after(*, outcome: Outcome, error: KubeError | None, kueue_mode: bool) -> dict:
    """The ``queues_applied`` a pass leaves on its state: what it found when it read the queues
    and succeeded; otherwise, in Kueue mode, that some may be there (a failed pass may have
    made some); otherwise unchanged."""
    if error is None and outcome.queues is not None:
        return {"queues_applied": outcome.queues}
    if kueue_mode:
        return {"queues_applied": True}
    return {}


def finish(outcome: Outcome, error: KubeError | None, what: str) -> Outcome:
    """Log the recorded pass; raise its error (for the task to retry a transient one)."""
    if error is not None:
        logger.warning("reconcile of %s failed: %s", what, error)
        raise error
    if outcome.writes:
        logger.info("reconciled %s: applied %s, deleted %s", what, outcome.applied, outcome.deleted)
    return outcome


def lock(row_id: int, *, lock_class: int = ADVISORY_LOCK_CLASS) -> None:
    """Wait for any other pass on this row (of ``lock_class``'s table); held until the
    transaction ends (or the worker's connection dies with it)."""
    lock_all([row_id], lock_class=lock_class)


def lock_all(row_ids: list[int], *, lock_class: int = ADVISORY_LOCK_CLASS) -> None:
    """``lock`` on every row, one after another in id order (one query)."""
    if connection.vendor == "postgresql" and row_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_advisory_xact_lock(%s::int, (id %% 2147483648)::int)) "
                "FROM (SELECT unnest(%s::bigint[]) AS id ORDER BY 1) AS rows",
                [lock_class, sorted(row_ids)],
            )


def record(
    state: ReconcileState,
    *,
    outcome: Outcome,
    error: KubeError | None,
    started,
    changes: dict | None = None,
) -> None:
    """Write the pass's outcome, and ``changes`` beside it. A change requested after the pass
    started leaves the row pending: the pass that change scheduled will settle it."""
    fields = outcome_fields(outcome=outcome, error=error, started=started, changes=changes)
    if outcome.namespace_deleted and error is None:
        fields["namespace_deleted_at"] = state.namespace_deleted_at or fields["last_applied_at"]
    type(state).objects.filter(pk=state.pk).update(**fields)


def outcome_fields(
    *, outcome: Outcome, error: KubeError | None, started, changes: dict | None = None
) -> dict:
    """The columns ``record`` writes for a pass's outcome (for one row or, from a sweep, for
    many that ended alike)."""
    now = timezone.now()
    Status = ReconcileState.Status
    fields: dict = {"last_reconciled_at": now, "reconcile_runs": F("reconcile_runs") + 1}
    settled_or_pending = Case(
        When(reconcile_requested_at__gt=started, then=Value(Status.PENDING)),
        default=Value(Status.IN_SYNC),
    )
    if error is not None:
        fields.update(
            status=Status.ERROR,
            last_error=str(error),
            last_error_at=now,
            consecutive_failures=F("consecutive_failures") + 1,
        )
    else:
        fields.update(last_applied_at=now, last_write_count=outcome.writes, consecutive_failures=0)
        if outcome.namespace_deleted:
            fields.update(
                status=Status.DELETED,
                applied_quota={},
                namespace_owned=None,  # gone: whoever makes it next, it is not known to be ours
            )
        else:
            fields.update(status=settled_or_pending)
    fields.update(changes or {})
    return fields
