"""The figures ``tenants.review_history`` shows beside a request: what the team was granted
(its grants), held and used (Prometheus, through the usage report) and how often its jobs
waited (the jobs), over the last 30 and 90 days, and the size they suggest.

Every window ends at the last full hour: the figures stay the same through the hour (and the
usage report's settled hours, kept per window start, are read from the cache), and a page and
the API agree.

A page of the review queue costs a constant number of queries: the grants of the page's teams
once, the jobs' waits in one aggregate, and one usage report per window (each cluster's
Prometheus once per window, its settled hours kept in the cache).

The suggestion reads the longest window: the GPUs the team held on average while a grant of
the kind was in force, with ``HEADROOM`` on top, rounded up, never fewer than one nor more than
asked. Where its jobs often waited (``OFTEN_WAITED_PERCENT`` of them longer than
``WAITED_MINUTES``), what it held says less than what it needed: the suggestion is the ask.
"""

from __future__ import annotations

import datetime
import math
from collections import defaultdict
from collections.abc import Sequence

from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from clusters.models import Cluster
from gpujobs.models import GpuJob
from monitoring import reports
from monitoring.selectors import grant_spans
from monitoring.usage import teams_usage_report
from tenants.models import QuotaGrant, Team
from tenants.review_history import WINDOWS_DAYS, Ask, GrantHistory, Suggestion, UseWindow

HEADROOM = 1.25
WAITED_MINUTES = 10
OFTEN_WAITED_PERCENT = 25


def grant_histories(
    asks: Sequence[Ask], *, now: datetime.datetime | None = None
) -> list[GrantHistory]:
    """Each ask's history, in order (``tenants.review_history.Provider``), its windows ending
    at the last full hour before ``now``."""
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    tz = timezone.get_current_timezone()
    team_ids = {ask.team_id for ask in asks}
    cluster_ids = {ask.cluster_id for ask in asks}
    longest = datetime.timedelta(days=max(WINDOWS_DAYS))
    spans = grant_spans(
        QuotaGrant.objects.filter(team_id__in=team_ids, cluster_id__in=cluster_ids)
        .exclude(ends_on__lt=(now - longest - datetime.timedelta(days=1)).date())
        .exclude(ended_at__lte=now - longest)
    )
    measured, errors = _measured(team_ids, cluster_ids, now=now)
    waits = _waits(team_ids, cluster_ids, now=now)
    histories = []
    for ask in asks:
        grants = [span for span in spans if _grant_matches(span, ask)]
        windows = []
        for days in WINDOWS_DAYS:
            period = reports.Period(now - datetime.timedelta(days=days), now)
            held, used = measured.get((days, ask.team_id, ask.cluster_id), (None, None))
            jobs, waited = waits.get((days, *_job_key(ask)), (0, 0))
            windows.append(
                UseWindow(
                    days=days,
                    granted_gpu_hours=sum(
                        g.share * reports.granted_gpu_hours([g], period, now=now, tz=tz)
                        for g in grants
                    ),
                    hours_in_force=hours_in_force(grants, period, tz=tz),
                    held_gpu_hours=held,
                    used_gpu_hours=used,
                    jobs=jobs,
                    jobs_waited=waited,
                    waited_minutes=WAITED_MINUTES,
                )
            )
        histories.append(
            GrantHistory(
                windows=tuple(windows),
                suggestion=suggest(ask.gpus, windows[-1]),
                error=errors.get(ask.cluster_id, ""),
            )
        )
    return histories


def _grant_matches(span: reports.GrantSpan, ask: Ask) -> bool:
    """The team's grants of the asked kind on the cluster: of the asked model when it names
    one (and those of any model, which it could use), of every model otherwise."""
    return (
        span.team_id == ask.team_id
        and span.cluster_id == ask.cluster_id
        and span.gpu_resource == ask.gpu_resource
        and (not ask.gpu_model or span.gpu_model in ("", ask.gpu_model))
    )


def _job_key(ask: Ask) -> tuple:
    return (ask.team_id, ask.cluster_id, ask.gpu_resource, ask.gpu_model)


def hours_in_force(
    grants: Sequence[reports.GrantSpan], period: reports.Period, *, tz: datetime.tzinfo
) -> float:
    """Hours of the period (up to its end, never the future) in which any of the grants was in
    force: the union of their intervals, so that two grants at once count their hours once."""
    intervals = []
    for grant in grants:
        start, end = reports.grant_interval(grant, tz)
        start = max(start, period.start)
        end = period.end if end is None else min(end, period.end)
        if end > start:
            intervals.append((start, end))
    total = 0.0
    reach = None
    for start, end in sorted(intervals):
        if reach is not None and start < reach:
            start = reach
        if end > start:
            total += (end - start).total_seconds() / 3600
        reach = end if reach is None else max(reach, end)
    return total


def _measured(
    team_ids: set[int], cluster_ids: set[int], *, now: datetime.datetime
) -> tuple[dict[tuple[int, int, int], tuple[float | None, float | None]], dict[int, str]]:
    """(window days, team id, cluster id) -> held and used GPU-hours from the usage report;
    and cluster id -> why its Prometheus could not say. One report per stretch between two
    windows' starts (the last 30 days, then the 60 before them), each window the sum of the
    stretches it covers: no time is measured twice."""
    teams = Team.objects.filter(pk__in=team_ids)
    clusters = Cluster.objects.filter(pk__in=cluster_ids)
    slugs = dict(teams.values_list("slug", "pk"))
    cluster_names = dict(clusters.values_list("name", "pk"))
    measured: dict[tuple[int, int, int], tuple[float | None, float | None]] = {}
    errors: dict[int, str] = {}
    so_far: dict[tuple[int, int], tuple[float | None, float | None]] = {}
    end = now
    for days in sorted(WINDOWS_DAYS):
        start = now - datetime.timedelta(days=days)
        report = teams_usage_report(
            teams=teams, every_team=False, start=start, end=end, clusters=clusters, now=now
        )
        end = start
        for name, error in report.errors.items():
            errors[cluster_names[name]] = error
        stretch = {
            (slugs[row.team_slug], cluster_names[row.cluster]): (
                row.held_gpu_hours,
                row.used_gpu_hours,
            )
            for row in report.rows
        }
        for key in so_far.keys() | stretch.keys():
            before, more = so_far.get(key, (0.0, 0.0)), stretch.get(key, (0.0, 0.0))
            so_far[key] = (_plus(before[0], more[0]), _plus(before[1], more[1]))
            measured[(days, *key)] = so_far[key]
    return measured, errors


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _waits(
    team_ids: set[int], cluster_ids: set[int], *, now: datetime.datetime
) -> dict[tuple, tuple[int, int]]:
    """(window days, team, cluster, GPU kind, model) -> jobs created in the window and those
    of them that waited longer than ``WAITED_MINUTES`` to start (one still waiting counts once
    it has; one that ended unstarted, for as long as it waited). A model's key counts the jobs
    of that model; the model "" key every job of the kind."""
    waited = ExpressionWrapper(
        Coalesce("started_at", "finished_at", Value(now)) - F("created_at"),
        output_field=DurationField(),
    )
    too_long = Q(wait__gt=datetime.timedelta(minutes=WAITED_MINUTES))
    aggregates = {}
    for days in WINDOWS_DAYS:
        since = Q(created_at__gte=now - datetime.timedelta(days=days))
        aggregates[f"jobs_{days}"] = Count("pk", filter=since)
        aggregates[f"waited_{days}"] = Count("pk", filter=since & too_long)
    rows = (
        GpuJob.objects.filter(
            team_id__in=team_ids,
            cluster_id__in=cluster_ids,
            created_at__gte=now - datetime.timedelta(days=max(WINDOWS_DAYS)),
            created_at__lte=now,
        )
        .annotate(wait=waited)
        .values("team_id", "cluster_id", "gpu_resource", "gpu_model")
        .annotate(**aggregates)
    )
    result: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        key = (row["team_id"], row["cluster_id"], row["gpu_resource"])
        for days in WINDOWS_DAYS:
            for model in {row["gpu_model"], ""}:
                counts = result[(days, *key, model)]
                counts[0] += row[f"jobs_{days}"]
                counts[1] += row[f"waited_{days}"]
    return {key: (jobs, waited) for key, (jobs, waited) in result.items()}


def suggest(asked: int, window: UseWindow) -> Suggestion:
    """The size the window's use suggests for an ask of ``asked`` GPUs, with its arithmetic."""
    days = window.days
    if window.granted_gpu_hours <= 0 or window.hours_in_force <= 0:
        return Suggestion(asked, f"No grant of this kind in the last {days} days: the ask.")
    if window.held_gpu_hours is None:
        return Suggestion(asked, "Prometheus could not say what the team held: the ask.")
    waits = f"{window.jobs_waited} of {window.jobs} jobs waited over {window.waited_minutes} min"
    if window.jobs and 100 * window.jobs_waited >= OFTEN_WAITED_PERCENT * window.jobs:
        return Suggestion(
            asked,
            f"{waits} in the last {days} days: it needed more than it held, so the ask.",
        )
    average = window.held_gpu_hours / window.hours_in_force
    padded = average * HEADROOM
    gpus = min(asked, max(1, math.ceil(round(padded, 6))))
    bound = ""
    if math.ceil(round(padded, 6)) > asked:
        bound = f", at most the {asked} asked"
    elif padded < 1:
        bound = ", at least 1"
    return Suggestion(
        gpus,
        f"Over {days} days it held {window.held_gpu_hours:,.1f} GPU-hours in the "
        f"{window.hours_in_force:,.1f} h a grant was in force: {average:.2f} GPUs on average; "
        f"with {round(100 * (HEADROOM - 1))}% headroom {padded:.2f}, rounded up{bound}: "
        f"{gpus} GPU{'' if gpus == 1 else 's'} ({waits}).",
    )
