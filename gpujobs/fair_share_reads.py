"""What usage-decayed fair sharing reads from the database: the teams' decayed use of
opportunistic jobs (``decayed_use_by_team``, registered with ``reconcile.desired_state`` so the
reconcile lowers each opportunistic queue's weight by it), and for a team on each of its Kueue
clusters the explainer a member reads (``team_fair_share``): weights, share now, decayed use,
place in line for the next idle GPU and a 30-day history. A constant number of queries,
whatever the number of clusters, teams and jobs.

A job's use is its GPUs (whole-GPU equivalents, ``monitoring.gpu_shares``) from ``started_at``
to ``finished_at`` (a running job: to now; one preempted and waiting again: to when it was
preempted). The arithmetic is ``reconcile.fair_share``'s, the words ``gpujobs.fair_share``'s; the
weights shown are the ones the reconcile writes (``reconcile.desired_state.lowered_by_use``),
from the same decayed use (``_decayed_use``).
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q
from django.utils import timezone

from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import OPPORTUNISTIC
from gpujobs import fair_share as words
from gpujobs.models import GpuJob
from gpujobs.observe import ACTIVE_STATES, FINAL_STATES
from monitoring import figures
from monitoring.gpu_shares import gpu_share
from monitoring.parts import Chart
from monitoring.permissions import can_see_clusters
from monitoring.prometheus import Series
from reconcile import desired_state, fair_share
from tenants.models import Team, TeamCluster

State = GpuJob.State
WAITING_STATES = {State.QUEUED, State.SUBMITTED, State.PENDING}
HISTORY_DAYS = 30
FIELDS = (
    "team_id",
    "cluster_id",
    "state",
    "gpus",
    "gpu_resource",
    "gpu_model",
    "created_at",
    "started_at",
    "finished_at",
    "preempted_at",
)


def _gpus(row: dict) -> float:
    return float(gpu_share(row["gpu_resource"], row["gpu_model"] or "")) * row["gpus"]


def _use(row: dict) -> fair_share.Use | None:
    """The row's time on GPUs (None: it never held any)."""
    start = row["started_at"]
    if start is None:
        return None
    if row["state"] in FINAL_STATES:
        end = row["finished_at"] or start
    elif row["state"] == State.RUNNING:
        end = None
    else:  # preempted and waiting again
        preempted = row["preempted_at"]
        end = preempted if preempted is not None and preempted > start else start
    return fair_share.Use(start=start, end=end, gpus=_gpus(row))


def _opportunistic_rows(*, clusters: list[Cluster], since: datetime.datetime, team_ids=None):
    """The opportunistic jobs of the clusters unfinished or finished since ``since`` (one
    query)."""
    rows = GpuJob.objects.filter(
        cluster__in=clusters, priority=GpuJob.Priority.OPPORTUNISTIC
    ).filter(Q(state__in=ACTIVE_STATES) | Q(finished_at__gte=since))
    if team_ids is not None:
        rows = rows.filter(team_id__in=team_ids)
    return list(rows.order_by("created_at", "pk").values(*FIELDS))


def decayed_use_by_team(
    *, cluster: Cluster, team_ids: list[int], now: datetime.datetime
) -> dict[int, float]:
    """Each team's decayed GPU-hours of opportunistic jobs on the cluster (one query; teams
    without use left out). The reconcile's reader (``gpujobs.apps``)."""
    since = fair_share.horizon(now=now, half_life_hours=cluster.fair_share_half_life_hours)
    rows = _opportunistic_rows(clusters=[cluster], since=since, team_ids=team_ids)
    return _decayed_use(rows, cluster=cluster, now=now)


def _decayed_use(rows: list[dict], *, cluster: Cluster, now: datetime.datetime) -> dict[int, float]:
    """Each team's decayed GPU-hours from the cluster's opportunistic job ``rows`` (as
    ``_opportunistic_rows`` reads them), counting the ones unfinished or finished since the
    horizon; teams without use left out. The reconcile's reader and the explainer both count by
    it, so the explainer shows the weights the reconcile writes."""
    half_life = cluster.fair_share_half_life_hours
    since = fair_share.horizon(now=now, half_life_hours=half_life)
    uses: dict[int, list[fair_share.Use]] = defaultdict(list)
    for row in rows:
        recent = row["state"] in ACTIVE_STATES or (
            row["finished_at"] is not None and row["finished_at"] >= since
        )
        if recent and (use := _use(row)) is not None:
            uses[row["team_id"]].append(use)
    return {
        pk: fair_share.decayed_gpu_hours(team_uses, now=now, half_life_hours=half_life)
        for pk, team_uses in uses.items()
    }


@dataclass(frozen=True)
class ClusterFairShare:
    """The team's standing for idle GPUs on one Kueue cluster."""

    cluster: Cluster
    team: words.Borrower
    line: list[words.Borrower]  # the borrowers waiting, the next in line first
    rank: int | None  # the team's place in ``line`` (None: nothing of it waits)
    sentence: str
    half_life_hours: int  # 0: usage decay off
    scale_gpu_hours: int
    history: list[fair_share.Day]
    names_shown: bool  # the viewer may see other teams' names (else ``words.ANOTHER_TEAM``)

    @property
    def waiting_teams(self) -> int:
        return len(self.line)

    @property
    def chart(self) -> Chart:
        return history_chart(self)


def team_fair_share(
    *,
    user: User | AnonymousUser,
    team: Team,
    clusters: list[Cluster] | None = None,
    now: datetime.datetime | None = None,
) -> list[ClusterFairShare]:
    """The team's standing on each Kueue cluster it has a namespace on (among ``clusters``
    when given: with none of them in Kueue mode, no query), by cluster name: four queries in
    all. Other teams are named only for viewers who see whole clusters (portal admins, as the
    cluster page's cohort usage)."""
    now = now or timezone.now()
    rows = TeamCluster.objects.filter(
        cluster__quota_mode=QuotaMode.KUEUE, namespace_deleted_at__isnull=True
    )
    if clusters is not None:
        kueue_ids = [c.pk for c in clusters if c.quota_mode == QuotaMode.KUEUE]
        if not kueue_ids:
            return []  # no query for a team without a Kueue cluster
        rows = rows.filter(cluster__in=kueue_ids)
    rows = list(rows.filter(cluster__team_states__team=team).select_related("cluster", "team"))
    # (the one query above reads every team of the team's Kueue clusters, with the clusters)
    by_cluster: dict[int, list[TeamCluster]] = defaultdict(list)
    for row in rows:
        by_cluster[row.cluster_id].append(row)
    kueue = sorted(
        {row.cluster_id: row.cluster for row in rows if row.team_id == team.pk}.values(),
        key=lambda c: c.name,
    )
    if not kueue:
        return []
    policies = desired_state.stored_queue_policies(
        team_ids=sorted({row.team_id for row in rows}), clusters=kueue
    )
    longest = max(c.fair_share_half_life_hours for c in kueue)
    since = fair_share.horizon(now=now, half_life_hours=longest) - datetime.timedelta(
        days=HISTORY_DAYS
    )
    jobs: dict[int, list[dict]] = defaultdict(list)
    for row in _opportunistic_rows(clusters=kueue, since=since):
        jobs[row["cluster_id"]].append(row)
    names_shown = can_see_clusters(user)
    return [
        _standing(
            team=team,
            cluster=cluster,
            teams=[row.team for row in by_cluster[cluster.pk]],
            policies=policies[cluster.pk],
            jobs=jobs[cluster.pk],
            now=now,
            names_shown=names_shown,
        )
        for cluster in kueue
    ]


def _standing(*, team, cluster, teams, policies, jobs, now, names_shown) -> ClusterFairShare:
    half_life = cluster.fair_share_half_life_hours
    scale = cluster.fair_share_usage_scale_gpu_hours
    decayed_use = _decayed_use(jobs, cluster=cluster, now=now) if half_life else None
    policies = desired_state.lowered_by_use(
        {other.pk: policies[other.pk] for other in teams}, cluster=cluster, uses=decayed_use
    )
    uses: dict[int, list[fair_share.Use]] = defaultdict(list)
    borrowed: dict[int, float] = defaultdict(float)
    waiting: dict[int, list[dict]] = defaultdict(list)
    for row in jobs:
        if row["state"] == State.RUNNING:
            borrowed[row["team_id"]] += _gpus(row)
        elif row["state"] in WAITING_STATES:
            waiting[row["team_id"]].append(row)
        if (use := _use(row)) is not None:
            uses[row["team_id"]].append(use)
    borrowers = []
    for other in teams:
        policy = policies[other.pk]
        decayed = (
            None if decayed_use is None else fair_share.rounded_use(decayed_use.get(other.pk, 0.0))
        )
        head = waiting[other.pk][0] if waiting[other.pk] else None
        borrowers.append(
            words.Borrower(
                team_id=other.pk,
                name=other.slug if names_shown or other.pk == team.pk else words.ANOTHER_TEAM,
                weight=policy.fair_sharing_weight,
                borrowing_weight=policy.weight(OPPORTUNISTIC),
                decayed_use=decayed,
                borrowed=borrowed[other.pk],
                waiting=len(waiting[other.pk]),
                first_waiting_at=head["created_at"] if head else None,
                first_waiting_gpus=_gpus(head) if head else 0.0,
                first_waiting_model=head["gpu_model"] if head else "",
            )
        )
    mine = next(b for b in borrowers if b.team_id == team.pk)
    return ClusterFairShare(
        cluster=cluster,
        team=mine,
        line=words.ranked(borrowers),
        rank=words.rank_of(team.pk, borrowers),
        sentence=words.next_gpu_sentence(team.pk, borrowers),
        half_life_hours=half_life,
        scale_gpu_hours=scale,
        history=fair_share.daily_history(
            uses[team.pk], days=_days(now), now=now, half_life_hours=half_life
        ),
        names_shown=names_shown,
    )


def _days(
    now: datetime.datetime,
) -> list[tuple[datetime.date, datetime.datetime, datetime.datetime]]:
    """The last ``HISTORY_DAYS`` local days, today last: (date, start, end)."""
    today = timezone.localdate(now)
    zone = timezone.get_current_timezone()
    days = []
    for back in range(HISTORY_DAYS - 1, -1, -1):
        date = today - datetime.timedelta(days=back)
        start = datetime.datetime.combine(date, datetime.time.min, tzinfo=zone)
        days.append((date, start, start + datetime.timedelta(days=1)))
    return days


def history_chart(standing: ClusterFairShare) -> Chart:
    """Borrowed GPU-hours per day and, with usage decay on, the decayed use at each day's end."""
    key = f"fair-share-{standing.cluster.pk}"
    title = f"Borrowing on {standing.cluster.name}, last {HISTORY_DAYS} days"
    if not any(day.gpu_hours for day in standing.history) and not any(
        day.decayed_use >= 0.5 for day in standing.history
    ):
        return Chart(key, title, message="No opportunistic job of the team ran in these days.")
    stamps = [
        datetime.datetime.combine(day.date, datetime.time.min, tzinfo=datetime.UTC).timestamp()
        for day in standing.history
    ]
    series = [
        Series({"name": "GPU-hours borrowed that day"}, stamps,
               [day.gpu_hours for day in standing.history]),
    ]  # fmt: skip
    if standing.half_life_hours:
        series.append(
            Series({"name": "decayed use at the day's end"}, stamps,
                   [day.decayed_use for day in standing.history])
        )  # fmt: skip
    figure = figures.time_series(
        series, title=title, axis=figures.Axis("GPU-hours", "GPU-h"), name=lambda s: s["name"]
    )
    return Chart(key, title, figure_json=figures.to_json(figure))
