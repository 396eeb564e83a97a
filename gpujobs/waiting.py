"""Why a job waits in Kueue, in words and numbers; where it stands in the queues; when it may
start; and how a cohort's GPUs are shared out among its teams. Pure functions of a cluster's
``queues.Snapshot`` and a few facts about jobs: no database, no network.

The figures, per GPU flavor (one per GPU model, and one for grants of any model):

* a team's **own** GPUs are the nominal quota of its guaranteed ClusterQueue; its guaranteed
  jobs use them and never borrow;
* its opportunistic ClusterQueue has no quota: everything it uses is borrowed (in Kueue's
  terms), first from the team's own idle GPUs, then from other teams'. Here only GPUs beyond the
  team's own idle ones count as **borrowed**;
* GPUs **lent** by a team are its idle own GPUs in use by other teams' opportunistic jobs. Kueue
  does not say whose quota a borrower uses, so the cohort's borrowed GPUs are shared among the
  lenders in proportion to what each leaves idle and may lend (its lending limit);
* **idle** GPUs of a team are its own GPUs nobody uses.

Positions: a job's place in its team's queue is Kueue's (its visibility API's
``positionInLocalQueue``). Kueue keeps no single queue for a whole cluster: each ClusterQueue
offers its head, and Kueue takes the heads by priority, then by age. A job's place in the
cluster is therefore counted as Kueue would meet the pending workloads of every ClusterQueue
of the cohort: by priority (higher first), then creation time, then position in its own queue.

Estimated start: the GPUs a waiting job needs (its own and those of the jobs before it in its
queue) beyond what is free now must be released by running jobs; each running job ends at the
latest when its maximum run time is up (counted from when Kueue last admitted it). The estimate
is the time by which enough of them will have ended, assuming no job of higher priority arrives
meanwhile; None when the running jobs the portal knows of cannot release enough.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clusters.vocabulary import GUARANTEED, OPPORTUNISTIC
from gpujobs.queues import FlavorFigures, PendingWorkload, QueueFigures, Snapshot

# Kueue's words naming the flavor a pending workload does not fit in.
FLAVOR_IN_MESSAGE_RE = re.compile(r"in flavor (\S+?),")


@dataclass(frozen=True)
class TeamFlavorUsage:
    """A team's GPUs of one flavor in its cohort: its own quota and how it is used."""

    team: str
    flavor: str
    gpu_model: str  # "" for a flavor of any model
    own: int = 0
    guaranteed_used: int = 0
    opportunistic_used: int = 0
    borrowed: int = 0
    lent: int = 0
    idle: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def in_use(self) -> int:
        return self.guaranteed_used + self.opportunistic_used

    @property
    def model_words(self) -> str:
        return self.gpu_model or "GPUs of any model"


def _own_figures(queue: QueueFigures | None, flavor: str) -> FlavorFigures:
    if queue is None:
        return FlavorFigures()
    return queue.flavors.get(flavor) or FlavorFigures()


def cohort_usage(snapshot: Snapshot, *, cohort: str) -> list[TeamFlavorUsage]:
    """Every team's usage of every GPU flavor in the cohort (teams with a queue there), by
    team then flavor."""
    queues = snapshot.in_cohort(cohort)
    teams = sorted({q.team for q in queues if q.team and q.kind})
    flavors = sorted({name for q in queues for name in q.flavors})
    rows = []
    for flavor in flavors:
        partial = []
        for team in teams:
            guaranteed = _own_figures(snapshot.team_queue(team, GUARANTEED), flavor)
            opportunistic_queue = snapshot.team_queue(team, OPPORTUNISTIC)
            opportunistic = _own_figures(opportunistic_queue, flavor)
            own_idle = max(guaranteed.nominal - guaranteed.used, 0)
            on_own = min(opportunistic.used, own_idle)  # opportunistic work on its own idle GPUs
            lendable = own_idle - on_own
            if guaranteed.lending_limit is not None:
                lendable = min(lendable, guaranteed.lending_limit)
            partial.append(
                {
                    "team": team,
                    "own": guaranteed.nominal,
                    "guaranteed_used": guaranteed.used,
                    "opportunistic_used": opportunistic.used,
                    "borrowed": opportunistic.used - on_own,
                    "free": own_idle - on_own,
                    "lendable": lendable,
                    "borrowing_limit": opportunistic.borrowing_limit
                    if opportunistic_queue is not None
                    else None,
                    "lending_limit": guaranteed.lending_limit,
                }
            )
        lent = _share(
            sum(p["borrowed"] for p in partial), [(p["team"], p["lendable"]) for p in partial]
        )
        for p in partial:
            rows.append(
                TeamFlavorUsage(
                    team=p["team"],
                    flavor=flavor,
                    gpu_model=snapshot.flavors.get(flavor, ""),
                    own=p["own"],
                    guaranteed_used=p["guaranteed_used"],
                    opportunistic_used=p["opportunistic_used"],
                    borrowed=p["borrowed"],
                    lent=lent[p["team"]],
                    idle=max(p["free"] - lent[p["team"]], 0),
                    borrowing_limit=p["borrowing_limit"],
                    lending_limit=p["lending_limit"],
                )
            )
    return sorted(rows, key=lambda r: (r.team, r.gpu_model, r.flavor))


def _share(total: int, weights: Sequence[tuple[str, int]]) -> dict[str, int]:
    """``total`` split in whole GPUs in proportion to the weights (largest remainders first),
    never more than a weight."""
    shares = {name: 0 for name, _ in weights}
    available = sum(w for _, w in weights)
    if total <= 0 or available <= 0:
        return shares
    total = min(total, available)
    exact = {name: total * w / available for name, w in weights}
    for name in shares:
        shares[name] = int(exact[name])
    left = total - sum(shares.values())
    for name, _ in sorted(weights, key=lambda nw: -(exact[nw[0]] - int(exact[nw[0]]))):
        if left <= 0:
            break
        shares[name] += 1
        left -= 1
    return shares


def team_usage(snapshot: Snapshot, *, team: str) -> list[TeamFlavorUsage]:
    """The team's rows of its cohort's usage (flavors it has quota in or uses)."""
    return [
        row
        for row in cohort_usage(snapshot, cohort=snapshot.cohort_of(team))
        if row.team == team and (row.own or row.in_use)
    ]


# --- one waiting job ----------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitingJob:
    """What the explanation needs of a job that waits in Kueue."""

    job_id: int
    team: str
    priority: str  # guaranteed / opportunistic
    gpus: int
    gpu_model: str = ""
    message: str = ""  # the job's own message (Kueue's reason in it names the flavor)


@dataclass(frozen=True)
class Positions:
    """1-based places: in the team's queue (Kueue's own count) and among every pending
    workload of the cluster's cohort (see the module's docstring); None when not pending."""

    team_queue: int | None = None
    team_queue_length: int = 0
    cluster: int | None = None
    cluster_length: int = 0


def _order(workload: PendingWorkload) -> tuple:
    return (-workload.priority, workload.created, workload.position, workload.cluster_queue)


def positions(snapshot: Snapshot, *, job_id: int, namespace: str) -> Positions:
    mine = next(
        (p for p in snapshot.pending if p.job_id == job_id and p.namespace == namespace), None
    )
    if mine is None:
        return Positions()
    queue = snapshot.cluster_queues.get(mine.cluster_queue)
    cohort = queue.cohort if queue is not None else ""
    in_cohort = {q.name for q in snapshot.in_cohort(cohort)} or {mine.cluster_queue}
    everyone = sorted((p for p in snapshot.pending if p.cluster_queue in in_cohort), key=_order)
    same_queue = [p for p in snapshot.pending if p.cluster_queue == mine.cluster_queue]
    return Positions(
        team_queue=mine.local_position + 1,
        team_queue_length=len(same_queue),
        cluster=everyone.index(mine) + 1,
        cluster_length=len(everyone),
    )


def ahead_in_queue(snapshot: Snapshot, *, job_id: int, namespace: str) -> list[PendingWorkload]:
    """The pending workloads before the job in its own queue."""
    mine = next(
        (p for p in snapshot.pending if p.job_id == job_id and p.namespace == namespace), None
    )
    if mine is None:
        return []
    return [
        p
        for p in snapshot.pending
        if p.cluster_queue == mine.cluster_queue and p.position < mine.position
    ]


def candidate_flavors(snapshot: Snapshot, job: WaitingJob) -> list[str]:
    """The GPU flavors the job may be given: its model's (every flavor when it asks for no
    model; Kueue never gives a job that names a model the flavor of any model), the one Kueue's
    message names first."""
    named = FLAVOR_IN_MESSAGE_RE.search(job.message or "")
    flavors = [
        name
        for name, model in sorted(snapshot.flavors.items())
        if not job.gpu_model or model == job.gpu_model
    ]
    if named and named.group(1) in flavors:
        flavors.remove(named.group(1))
        flavors.insert(0, named.group(1))
    return flavors


def _pick_flavor(snapshot: Snapshot, job: WaitingJob, rows: dict[str, TeamFlavorUsage]) -> str:
    flavors = candidate_flavors(snapshot, job)
    if FLAVOR_IN_MESSAGE_RE.search(job.message or "") and flavors:
        return flavors[0]
    with_quota = [f for f in flavors if f in rows and rows[f].own]
    return (with_quota or flavors or [""])[0]


def _borrowable(snapshot: Snapshot, *, cohort: str, flavor: str) -> int:
    """GPUs of the flavor the cohort's queues leave unused and may lend, less those lent."""
    queues = snapshot.in_cohort(cohort)
    lendable = sum(_own_figures(q, flavor).lendable for q in queues)
    borrowed = sum(_own_figures(q, flavor).borrowed for q in queues)
    return max(lendable - borrowed, 0)


@dataclass(frozen=True)
class Explanation:
    """Why a job waits, in words, with the numbers it is made of, and what is free for it now."""

    words: str
    flavor: str = ""
    gpu_model: str = ""
    own: int = 0
    in_use: int = 0
    idle_in_cohort: int = 0
    may_borrow: int | None = None  # None: no limit
    free_now: int = 0


def explain(snapshot: Snapshot, job: WaitingJob, *, cluster_name: str) -> Explanation:
    """Why the job waits: its team's use of its own GPUs of the flavor it waits for, the idle
    GPUs of the cohort and what the team may borrow of them, against what it needs."""
    if snapshot.kueue_error:
        return Explanation(words=snapshot.kueue_error)
    queue = snapshot.team_queue(job.team, job.priority)
    if queue is None:
        return Explanation(
            words=f"Team {job.team} has no {job.priority} queue on cluster {cluster_name} yet: "
            "the portal is setting it up, and the job waits until it is there."
        )
    if queue.inactive:
        return Explanation(
            words=f"Kueue is not admitting from ClusterQueue {queue.name}: {queue.inactive}"
        )
    rows = {row.flavor: row for row in team_usage(snapshot, team=job.team)}
    flavor = _pick_flavor(snapshot, job, rows)
    row = rows.get(flavor) or TeamFlavorUsage(
        team=job.team, flavor=flavor, gpu_model=snapshot.flavors.get(flavor, "")
    )
    model = row.model_words
    if job.priority == GUARANTEED:
        free = max(row.own - row.guaranteed_used, 0)
        words = (
            f"Team {job.team}'s guaranteed jobs use {row.guaranteed_used} of its {row.own} "
            f"{model}; this job needs {job.gpus} and {free} {'is' if free == 1 else 'are'} free. "
            "Guaranteed jobs run only within the team's own quota"
        )
        lent_out = row.lent + min(row.opportunistic_used, row.own - row.guaranteed_used)
        if lent_out > 0:
            words += (
                f"; {lent_out} of its {model} run opportunistic jobs now, which Kueue preempts "
                "to give them back"
            )
        return Explanation(
            words=words + ".",
            flavor=flavor,
            gpu_model=row.gpu_model,
            own=row.own,
            in_use=row.guaranteed_used,
            free_now=free,
        )
    cohort = snapshot.cohort_of(job.team)
    idle = _borrowable(snapshot, cohort=cohort, flavor=flavor)
    limit = row.borrowing_limit
    words = (
        f"Team {job.team} uses {row.in_use} of its {row.own} {model}; {idle} {model} "
        f"{'is' if idle == 1 else 'are'} idle in the cohort"
    )
    may = None
    if limit is not None:
        may = max(limit - row.opportunistic_used, 0)
        words += f" {'but' if may < idle else 'and'} {job.team} may borrow {may} more"
        words += f" (its borrowing limit is {limit})"
    free = idle if may is None else min(idle, may)
    words += f"; this job needs {job.gpus}."
    return Explanation(
        words=words,
        flavor=flavor,
        gpu_model=row.gpu_model,
        own=row.own,
        in_use=row.in_use,
        idle_in_cohort=idle,
        may_borrow=may,
        free_now=free,
    )


@dataclass(frozen=True)
class Release:
    """GPUs a running job holds until it ends, at the latest at ``end_by``."""

    end_by: datetime.datetime
    gpus: int


def estimated_start(
    *,
    needed: int,
    free_now: int,
    releases: Iterable[Release],
    now: datetime.datetime,
) -> datetime.datetime | None:
    """When ``needed`` GPUs will be free, at the latest: now if ``free_now`` covers them, else
    when enough of the running jobs will have ended; None if they never release enough."""
    short = needed - free_now
    if short <= 0:
        return now
    for release in sorted(releases, key=lambda r: r.end_by):
        short -= release.gpus
        if short <= 0:
            return max(release.end_by, now)
    return None


def needed_gpus(snapshot: Snapshot, job: WaitingJob, *, gpus_of: dict[int, int]) -> int:
    """The job's GPUs and those of the jobs before it in its queue (1 for a workload the
    portal does not know)."""
    ahead = ahead_in_queue(snapshot, job_id=job.job_id, namespace=job.team)
    return job.gpus + sum(gpus_of.get(p.job_id, 1) if p.job_id else 1 for p in ahead)
