"""Reconcile every team on one cluster in one go: what the periodic sweep runs.

Two steps:

* **The check**: one LIST per kind for the whole cluster (the portal's objects, by its
  managed-by label), held against what the database wants for each team (read for all the
  teams in a few queries, not a few a team). A team whose objects are all there as wanted, none
  being deleted and none of the portal's left over, is recorded in sync with no request of its
  own: a sweep over an unchanged cluster costs one list per kind and no write, however many
  teams it has.
* **The passes**, for every other team: the very pass a grant change triggers (the advisory
  lock, the namespace's owner read now, the read by name that nobody else's object has a name
  the portal wants, server-side apply, pruning, the outcome on ``TeamCluster``), in batches
  that take their locks and read the database together
  (``reconcile.reconcile_teams_on_cluster``), ``PORTAL_RECONCILE_SWEEP_CONCURRENCY`` passes
  talking to the cluster at once over its one pooled client: a cold cluster costs about the API
  server's write time, not the sum of the passes' round trips and queries.

The check never writes to the cluster and never decides that an object is the portal's: it only
finds teams with nothing to do. Anything missing, different, being deleted or left over sends
the team to a full pass, which reads again what it acts on.

The in-sync record is a status write, made without a team's advisory lock: it says what the
lists showed, and a change requested after the check started leaves the row pending (as
``reconcile_passes.record`` does for a pass), for the pass that change enqueued to settle.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone

from clusters.kube import KINDS, KubeClient, KubeError
from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import MANAGED_BY_LABEL, TEAM_LABEL
from core.memory import cyclic_gc_paused
from reconcile import desired_state, manifests, namespace_sync, passes, queue_manifests, team_pass
from tenants.models import TeamCluster

logger = logging.getLogger(__name__)

# Passes locked and read together: a batch holds its teams' advisory locks while it talks to the
# cluster, so a change to one of them waits for the batch (a few seconds at most).
PASSES_PER_BATCH = 50
# What a team's full pass reads (in Kueue mode its queues too): the check lists the same kinds.
TEAM_KINDS = ("Namespace", *namespace_sync.NAMESPACED_KINDS)


@dataclass
class SweepOutcome:
    """What a sweep over a cluster's teams did: the teams it found in sync, the passes it made
    and those that failed (recorded on their rows), and the requests it made in all."""

    in_sync: list[int] = field(default_factory=list)
    passed: list[int] = field(default_factory=list)
    failed: dict[int, KubeError] = field(default_factory=dict)
    reads: int = 0
    writes: int = 0

    @property
    def to_retry(self) -> list[int]:
        """Teams whose pass failed for a reason worth retrying (their own task retries them
        with backoff)."""
        return [team_id for team_id, error in self.failed.items() if error.transient]


def portal_objects(
    kube: KubeClient, *, kinds: tuple[str, ...], rules: manifests.Policy
) -> Callable[[], tuple[dict[str, dict[tuple, dict]], set[str]]]:
    """Start listing the portal's objects on the cluster, one list per kind at once. The
    returned callable waits for the lists and gives the objects by team slug, then by
    ``object_key``, as a team's pass would read them (namespaced ones in the team's namespace
    only); and the kinds the cluster served (a Kueue kind is missing where Kueue is not
    installed)."""
    selector = f"{MANAGED_BY_LABEL}={rules.portal_name}"

    def read(kind: str) -> list[dict] | None:
        if kind in namespace_sync.QUEUE_KINDS:
            return namespace_sync.list_queue_kind(kube, kind, label_selector=selector)
        return kube.list(kind, label_selector=selector)

    lists = passes.each_started(read, list(kinds))
    return lambda: _by_team(kinds, lists())


def _by_team(
    kinds: tuple[str, ...], lists: list[list[dict] | None]
) -> tuple[dict[str, dict[tuple, dict]], set[str]]:
    by_team: dict[str, dict[tuple, dict]] = defaultdict(dict)
    served = set()
    for kind, items in zip(kinds, lists, strict=True):
        if items is None:
            continue
        served.add(kind)
        for obj in items:
            slug = ((obj.get("metadata") or {}).get("labels") or {}).get(TEAM_LABEL)
            key = manifests.object_key(obj)
            if slug and (not KINDS[kind].namespaced or key[1] == slug):
                by_team[slug][key] = obj
    return by_team, served


def holds(found: dict[tuple, dict], desired: list[dict]) -> bool:
    """Whether the team's objects ``found`` on the cluster are what a pass would leave there:
    every desired object present, not being deleted and matching; nothing else of the portal's
    for the team that a pass would prune."""
    wanted = set()
    for obj in desired:
        key = manifests.object_key(obj)
        wanted.add(key)
        current = found.get(key)
        if current is None or _being_deleted(current) or not manifests.matches(obj, current):
            return False
    return all(
        key in wanted or key[0] == "Namespace" or _being_deleted(obj) for key, obj in found.items()
    )


def _being_deleted(obj: dict) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def reconcile_cluster_teams(
    *,
    cluster_id: int,
    team_ids: list[int] | None = None,
    kube: KubeClient | None = None,
    concurrency: int | None = None,
    today: datetime.date | None = None,
) -> SweepOutcome:
    """Check every team on the cluster (or those of ``team_ids``) and pass over those that are
    not in sync, with the grants in effect ``today`` (default: the local date). Raises
    ``KubeError`` when the check's lists fail (the cluster cannot be reached): nothing was
    recorded then. A failed pass is recorded on its row and returned."""
    cluster = Cluster.objects.get(pk=cluster_id)
    kube = kube or KubeClient.for_cluster(cluster)
    reads, writes = kube.reads, kube.writes
    kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
    if not desired_state.admission_in_place(cluster):
        # A cluster's first sweep: its admission policies come before any binding, once here
        # rather than once in each team's pass (a failure is recorded on the cluster; each
        # pass then tries again and says so).
        team_pass.put_admission_in_place(cluster=cluster, kube=kube)
    started = timezone.now()
    rows = TeamCluster.objects.filter(cluster=cluster, namespace_deleted_at__isnull=True)
    if team_ids is not None:
        rows = rows.filter(team_id__in=team_ids)
    rows = list(rows.select_related("team", "team__department").order_by("team_id"))
    kinds = (*TEAM_KINDS, *(namespace_sync.QUEUE_KINDS if kueue_mode else ()))
    # The check decodes and builds thousands of objects: see ``core.memory``.
    with cyclic_gc_paused():
        in_sync, to_pass = _check(rows, cluster=cluster, kube=kube, kinds=kinds, today=today)

    record_in_sync(in_sync, started=started, kueue_mode=kueue_mode)
    outcome = SweepOutcome(in_sync=[row.team_id for row in rows if row.pk in in_sync])
    for team_id, error in run_passes(
        team_ids=to_pass, cluster_id=cluster_id, kube=kube, concurrency=concurrency, today=today
    ).items():
        if error is None:
            outcome.passed.append(team_id)
        else:
            outcome.failed[team_id] = error
    outcome.reads, outcome.writes = kube.reads - reads, kube.writes - writes
    return outcome


def _check(
    rows: list[TeamCluster],
    *,
    cluster: Cluster,
    kube: KubeClient,
    kinds: tuple[str, ...],
    today: datetime.date | None,
) -> tuple[dict[int, desired_state.Desired], list[int]]:
    """The check: the rows whose team holds on the cluster, with what it wants, by row id; and
    the ids of the other teams, which need a pass."""
    rules = desired_state.policy()
    kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
    teams = [row.team for row in rows]
    # The lists run while the desired objects are read and built: the API server's time to
    # answer overlaps this process's. Both after ``started``: what changed since waits pending.
    listed = portal_objects(kube, kinds=kinds, rules=rules)

    states = desired_state.team_states(teams=teams, cluster=cluster, today=today)
    admission = desired_state.admission_in_place(cluster)
    kueue = desired_state.kueue_cluster_state(cluster) if kueue_mode else None
    queue_rules = desired_state.queue_policies(team_ids=[t.pk for t in teams], cluster=cluster)
    wanted: dict[int, desired_state.Desired] = {}
    for row, team in zip(rows, teams, strict=True):
        deleting = team.archived_at is not None and row.namespace_delete_requested_at
        # A quota only pass prunes queues a Kueue-mode pass left: the check did not list them.
        unlisted_queues = row.queues_applied and not kueue_mode
        if deleting or unlisted_queues:
            continue  # a pass, whatever the lists show
        wanted[row.pk] = desired_state.desired_state(
            team=team,
            cluster=cluster,
            rules=rules,
            state=states[team.pk],
            kueue=kueue,
            queue_rules=queue_rules.get(team.pk, queue_manifests.QueuePolicy()),
            admission=admission,
        )
    found, served = listed()
    in_sync: dict[int, desired_state.Desired] = {}
    to_pass: list[int] = []
    for row, team in zip(rows, teams, strict=True):
        desired = wanted.get(row.pk)
        if (
            desired is not None
            and served.issuperset(kinds)
            and holds(found.get(team.slug, {}), desired.objects)
        ):
            in_sync[row.pk] = desired
        else:
            to_pass.append(team.pk)
    return in_sync, to_pass


def record_in_sync(
    desired_by_row: dict[int, desired_state.Desired], *, started, kueue_mode: bool
) -> None:
    """Record the rows the check found in sync, as a pass that wrote nothing would: one UPDATE
    for all the rows that record the same quota (few distinct ones), not one a row."""
    groups: dict[tuple[str, bool | None], list[int]] = defaultdict(list)
    for pk, desired in desired_by_row.items():
        quota = next(
            (obj["spec"]["hard"] for obj in desired.objects if obj["kind"] == "ResourceQuota"), {}
        )
        # In Kueue mode the check listed the queues, as a pass would: whether the team has any.
        queues = (
            any(obj["kind"] in namespace_sync.QUEUE_KINDS for obj in desired.objects)
            if kueue_mode
            else None
        )
        groups[(json.dumps(quota, sort_keys=True), queues)].append(pk)
    for (quota, queues), pks in groups.items():
        outcome = passes.Outcome(quota=json.loads(quota), queues=queues)
        changes = passes.queues_applied_after(outcome=outcome, error=None, kueue_mode=kueue_mode)
        changes.update(applied_quota=outcome.quota, namespace_owned=True)
        fields = passes.outcome_fields(
            outcome=outcome, error=None, started=started, changes=changes
        )
        TeamCluster.objects.filter(pk__in=pks).update(**fields)


def run_passes(
    *,
    team_ids: list[int],
    cluster_id: int,
    kube: KubeClient,
    concurrency: int | None = None,
    today: datetime.date | None = None,
) -> dict[int, KubeError | None]:
    """A full pass for each team, in batches of ``PASSES_PER_BATCH`` that lock and read the
    database together (``reconcile.reconcile_teams_on_cluster``), ``concurrency`` of a batch's
    passes talking to the cluster at once; each pass's error (None when it succeeded), by team
    id."""
    concurrency = concurrency or settings.PORTAL_RECONCILE_SWEEP_CONCURRENCY
    results: dict[int, KubeError | None] = {}
    for start in range(0, len(team_ids), PASSES_PER_BATCH):
        batch = team_pass.reconcile_teams_on_cluster(
            team_ids=team_ids[start : start + PASSES_PER_BATCH],
            cluster_id=cluster_id,
            kube=kube,
            concurrency=concurrency,
            today=today,
        )
        for team_id, (outcome, error, what) in batch.items():
            results[team_id] = error
            if error is None:
                passes.finish(outcome, error, what)
            else:
                logger.warning("reconcile of %s failed: %s", what, error)
    return results
