"""Reads for the pages and the API about Kueue's queues: why a job waits (in words and numbers),
where it stands, when it may start; a team's queue on a cluster (admitted and waiting jobs, GPUs
own, borrowed, lent and idle); a cluster's cohort usage per team. From the cluster's
``QueueSnapshot`` (written by the watcher) and the jobs' rows; the arithmetic is ``waiting``'s.
No cluster calls: a page costs a few queries however busy the queues are.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from django.utils import timezone

from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import GUARANTEED
from gpujobs import selectors, waiting
from gpujobs.models import GpuJob, QueueSnapshot
from gpujobs.queues import HeldOutside, Snapshot
from tenants.models import Team
from workloads import queueing
from workloads.pod_states import Reason

State = GpuJob.State

# A job that waits in Kueue (not admitted): the states and reasons that say so.
WAITING_REASONS = (Reason.IN_QUEUE, Reason.PREEMPTED, Reason.EVICTED)
ADMITTED_STATES = (State.PENDING, State.RUNNING)


def cluster_snapshot(cluster: Cluster) -> Snapshot:
    return Snapshot.from_row(QueueSnapshot.objects.filter(cluster=cluster).first())


def waits_in_kueue(job: GpuJob) -> bool:
    """Whether the job waits for Kueue: in its queue (or about to be), or in the portal while
    Kueue does not admit."""
    if job.state == State.QUEUED:
        return job.reason == Reason.KUEUE_NOT_ADMITTING
    if not job.queue_name:
        return False
    if job.state == State.SUBMITTED:
        return True
    return job.state == State.PENDING and job.reason in WAITING_REASONS


def is_admitted(job: GpuJob) -> bool:
    return bool(job.queue_name) and (
        job.state == State.RUNNING or (job.state == State.PENDING and job.reason == Reason.ADMITTED)
    )


@dataclass(frozen=True)
class QueueStatus:
    """Where a job waiting in Kueue stands: why it waits, its places in the queues, when it
    may start (None: no estimate), the figures behind the words, and whether Kueue answers."""

    why: str
    positions: waiting.Positions = field(default_factory=waiting.Positions)
    estimated_start: datetime.datetime | None = None
    explanation: waiting.Explanation | None = None
    kueue_admitting: bool = True
    as_of: datetime.datetime | None = None


class ClusterQueueReads:
    """What the queue statuses of one cluster's waiting jobs read, read once for all of them:
    the watcher's snapshot of Kueue, and, when a status estimates a start, the GPUs of the
    portal's jobs pending there and what the admitted jobs hold. A list or a queue of any
    number of waiting jobs costs at most three queries per cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.snapshot = cluster_snapshot(cluster)

    @cached_property
    def pending_gpus(self) -> dict[int, int]:
        """The GPUs each of the portal's jobs pending in Kueue asks for, by job id."""
        ids = [p.job_id for p in self.snapshot.pending if p.job_id]
        if not ids:
            return {}
        return dict(
            GpuJob.objects.filter(cluster=self.cluster, pk__in=ids).values_list("pk", "gpus")
        )

    @cached_property
    def _holdings(self) -> list[tuple[str, int, str, datetime.datetime, int]]:
        """The admitted jobs holding GPUs: (flavor, team id, priority, end at the latest, GPUs);
        a job ends at the latest its maximum run time after it was last admitted or started."""
        jobs = GpuJob.objects.filter(cluster=self.cluster, state__in=ADMITTED_STATES).exclude(
            reason__in=WAITING_REASONS
        )
        holdings = []
        for flavor, team_id, priority, admitted, started, runtime, gpus in jobs.values_list(
            "admitted_flavor",
            "team_id",
            "priority",
            "admitted_at",
            "started_at",
            "max_runtime_seconds",
            "gpus",
        ):
            since = admitted or started
            if since is not None:
                end_by = since + datetime.timedelta(seconds=runtime)
                holdings.append((flavor, team_id, priority, end_by, gpus))
        return holdings

    def releases(
        self, *, flavor: str, team: Team | None, priority: str | None
    ) -> list[waiting.Release]:
        """The admitted jobs holding GPUs of the flavor (of the team and priority, when given),
        each with when it ends at the latest."""
        return [
            waiting.Release(end_by=end_by, gpus=gpus)
            for held, team_id, kind, end_by, gpus in self._holdings
            if held == flavor
            and (team is None or team_id == team.pk)
            and (priority is None or kind == priority)
        ]


def queue_status(
    job: GpuJob, *, reads: ClusterQueueReads | None = None, now: datetime.datetime | None = None
) -> QueueStatus | None:
    """Where the job stands in Kueue's queues, or None when it does not wait there. ``reads``:
    its cluster's, shared by the statuses of a page (read here when not given)."""
    if not waits_in_kueue(job):
        return None
    reads = reads if reads is not None else ClusterQueueReads(job.cluster)
    snapshot = reads.snapshot
    now = now or timezone.now()
    if job.state == State.QUEUED:
        return QueueStatus(why=job.message, kueue_admitting=False, as_of=job.state_changed_at)
    facts = waiting.WaitingJob(
        job_id=job.pk,
        team=job.team.slug,
        priority=job.priority,
        gpus=job.gpus,
        gpu_model=job.gpu_model,
        message=job.message,
    )
    explanation = waiting.explain(snapshot, facts, cluster_name=job.cluster.name)
    places = waiting.positions(snapshot, job_id=job.pk, namespace=job.team.slug)
    estimate = None
    if explanation.flavor and not snapshot.kueue_error:
        guaranteed = job.priority == GUARANTEED
        estimate = waiting.estimated_start(
            needed=waiting.needed_gpus(snapshot, facts, gpus_of=reads.pending_gpus),
            free_now=explanation.free_now,
            releases=reads.releases(
                flavor=explanation.flavor,
                team=job.team if guaranteed else None,
                priority=GUARANTEED if guaranteed else None,
            ),
            now=now,
        )
    return QueueStatus(
        why=explanation.words,
        positions=places,
        estimated_start=estimate,
        explanation=explanation if explanation.flavor else None,
        kueue_admitting=not snapshot.kueue_error,
        as_of=snapshot.taken_at,
    )


def queue_statuses(
    jobs: Iterable[GpuJob], *, reads: dict[int, ClusterQueueReads] | None = None
) -> dict[int, QueueStatus]:
    """The queue status of each waiting job, by job id, reading each cluster's queue facts
    once (into ``reads``, by cluster id, when given: a caller may share them further)."""
    reads = {} if reads is None else reads
    statuses = {}
    for job in jobs:
        if not waits_in_kueue(job):
            continue
        if job.cluster_id not in reads:
            reads[job.cluster_id] = ClusterQueueReads(job.cluster)
        status = queue_status(job, reads=reads[job.cluster_id])
        if status is not None:
            statuses[job.pk] = status
    return statuses


@dataclass(frozen=True)
class TeamQueue:
    """A team's place in a Kueue cluster: its GPUs per flavor (own, in use, borrowed, lent,
    idle), its admitted jobs, its waiting jobs in queue order with their status, and the GPUs
    its pods hold outside the queue."""

    team: Team
    cluster: Cluster
    kueue: bool
    usage: list[waiting.TeamFlavorUsage]
    admitted: list[GpuJob]
    waiting: list[tuple[GpuJob, QueueStatus]]
    kueue_error: str = ""
    as_of: datetime.datetime | None = None
    held_outside: HeldOutside = field(default_factory=HeldOutside)

    @property
    def borrowed(self) -> int:
        return sum(row.borrowed for row in self.usage)

    @property
    def lent(self) -> int:
        return sum(row.lent for row in self.usage)


def _queue_order(item: tuple[GpuJob, QueueStatus]) -> tuple:
    job, status = item
    place = status.positions.cluster
    return (place is None, place or 0, job.created_at, job.pk)


def team_queue(*, team: Team, cluster: Cluster, jobs=None) -> TeamQueue:
    """The team's queue on the cluster. ``jobs``: the team's jobs the reader may see there
    (every unfinished one by default)."""
    if jobs is None:
        jobs = selectors.active_jobs(team=team, cluster=cluster).select_related(
            "team", "cluster", "submitted_by"
        )
    jobs = [j for j in jobs if j.cluster_id == cluster.pk and not j.is_final]
    reads = ClusterQueueReads(cluster)
    snapshot = reads.snapshot
    statuses = queue_statuses(jobs, reads={cluster.pk: reads})
    return TeamQueue(
        team=team,
        cluster=cluster,
        kueue=queueing.kueue_mode(cluster),
        usage=waiting.team_usage(snapshot, team=team.slug),
        admitted=sorted((j for j in jobs if is_admitted(j)), key=lambda j: j.pk),
        waiting=sorted(((j, statuses[j.pk]) for j in jobs if j.pk in statuses), key=_queue_order),
        kueue_error=snapshot.kueue_error,
        as_of=snapshot.taken_at,
        held_outside=snapshot.held_outside.get(team.slug, HeldOutside()),
    )


def team_queues(
    *, team: Team, jobs: list[GpuJob], clusters: list[Cluster] | None = None
) -> list[TeamQueue]:
    """The team's queue on every Kueue cluster where it has unfinished jobs or a queue: among
    ``clusters`` (the team's clusters, when the caller has them), else where the watcher last
    saw a queue of the team."""
    kueue = {j.cluster_id: j.cluster for j in jobs if queueing.kueue_mode(j.cluster)}
    if clusters is not None:
        kueue.update({c.pk: c for c in clusters if queueing.kueue_mode(c)})
    else:
        for row in QueueSnapshot.objects.select_related("cluster").filter(
            cluster__quota_mode=QuotaMode.KUEUE
        ):
            if Snapshot.from_row(row).team_queue(team.slug, GUARANTEED) is not None:
                kueue.setdefault(row.cluster_id, row.cluster)
    return [
        team_queue(team=team, cluster=cluster, jobs=[j for j in jobs if j.cluster_id == pk])
        for pk, cluster in sorted(kueue.items(), key=lambda item: item[1].name)
    ]


@dataclass(frozen=True)
class TeamCohortRows:
    """One team's rows of its cohort's usage: the GPU flavors it has quota in, uses, borrows,
    lends or has a limit on."""

    team: str
    rows: list[waiting.TeamFlavorUsage]


@dataclass(frozen=True)
class CohortUsage:
    """A Kueue cluster's cohorts: per team and GPU flavor, own, borrowed, lent and idle (only
    the rows with any of them, or a limit, grouped by team); the teams with neither quota nor
    use on the cluster; and per team the GPUs its pods hold outside the queue."""

    cluster: Cluster
    cohorts: dict[str, list[TeamCohortRows]]
    kueue_error: str = ""
    as_of: datetime.datetime | None = None
    held_outside: dict[str, HeldOutside] = field(default_factory=dict)
    teams_without_quota_or_use: tuple[str, ...] = ()

    @property
    def gpus_held_outside(self) -> int:
        return sum(held.gpus for held in self.held_outside.values())


def has_quota_or_use(row: waiting.TeamFlavorUsage) -> bool:
    """Whether a row of a cohort's usage says anything: GPUs own, in use, borrowed or lent, or
    a borrowing or lending limit above 0 (no limit, like a limit of 0, says nothing)."""
    return bool(
        row.own
        or row.in_use
        or row.borrowed
        or row.lent
        or row.borrowing_limit
        or row.lending_limit
    )


def _by_team(rows: list[waiting.TeamFlavorUsage]) -> list[TeamCohortRows]:
    """The rows worth showing, grouped by team (in the rows' order: by team, then flavor)."""
    teams: dict[str, list[waiting.TeamFlavorUsage]] = {}
    for row in rows:
        if has_quota_or_use(row):
            teams.setdefault(row.team, []).append(row)
    return [TeamCohortRows(team=team, rows=team_rows) for team, team_rows in teams.items()]


def cohort_usage(cluster: Cluster) -> CohortUsage:
    """The cluster's cohort usage as the watcher last read it: only the rows that say something
    (``has_quota_or_use``), by team; the teams with a queue but no such row are counted."""
    snapshot = cluster_snapshot(cluster)
    cohorts = sorted({q.cohort for q in snapshot.cluster_queues.values() if q.cohort})
    every = {c: waiting.cohort_usage(snapshot, cohort=c) for c in cohorts}
    shown = {c: _by_team(rows) for c, rows in every.items()}
    listed = {group.team for groups in shown.values() for group in groups}
    queued = {q.team for q in snapshot.cluster_queues.values() if q.team and q.kind and q.cohort}
    return CohortUsage(
        cluster=cluster,
        cohorts={c: groups for c, groups in shown.items() if groups},
        kueue_error=snapshot.kueue_error,
        as_of=snapshot.taken_at,
        teams_without_quota_or_use=tuple(sorted(queued - listed)),
        held_outside=snapshot.held_outside,
    )
