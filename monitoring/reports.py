"""Usage report arithmetic: pure functions, no I/O.

A report covers [start, end) split into periods (days, ISO weeks, calendar months, or the whole
range). Per team, cluster and period it gives GPU-hours

* granted: what the team's grants allowed, each grant's GPUs times the hours it was in force,
  as GPU equivalents (a MIG slice as its share of a GPU, a replica of a shared GPU as
  1/replicas: ``GrantSpan.share``), so that held is measured against granted in one unit;
* held: GPU equivalents the team's pods held (measured in Prometheus);
* used: held GPU-hours weighted by utilisation (a GPU at 25% for 4 hours is one used GPU-hour).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core import spreadsheets
from core.ratios import percent_of
from monitoring.gpu_shares import gpu_share

BUCKETS = ("day", "week", "month", "total")
MAX_PERIODS = 400


@dataclass(frozen=True)
class Period:
    start: datetime.datetime
    end: datetime.datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def _next_boundary(moment: datetime.datetime, bucket: str) -> datetime.datetime:
    """The start of the day, ISO week (Monday) or month after the one ``moment`` is in, in
    ``moment``'s own time zone."""
    tz = moment.tzinfo
    day = moment.date()
    if bucket == "day":
        following = day + datetime.timedelta(days=1)
    elif bucket == "week":
        following = day + datetime.timedelta(days=7 - day.weekday())
    elif bucket == "month":
        following = (day.replace(day=1) + datetime.timedelta(days=32)).replace(day=1)
    else:
        raise ValueError(f"unknown bucket {bucket!r}")
    return datetime.datetime.combine(following, datetime.time(), tzinfo=tz)


def periods(start: datetime.datetime, end: datetime.datetime, bucket: str) -> list[Period]:
    """Split [start, end) at day, week or month boundaries (of start's time zone); ``total``
    keeps it whole. The first and last periods may be partial."""
    if end <= start:
        raise ValueError("the report must end after it starts")
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be one of {', '.join(BUCKETS)}")
    if bucket == "total":
        return [Period(start, end)]
    result = []
    cursor = start
    while cursor < end:
        boundary = min(_next_boundary(cursor, bucket), end)
        result.append(Period(cursor, boundary))
        cursor = boundary
        if len(result) > MAX_PERIODS:
            raise ValueError(f"more than {MAX_PERIODS} periods: choose a longer bucket")
    return result


@dataclass(frozen=True, slots=True)
class GrantSpan:
    """A grant reduced to what the report needs: its GPUs and when it was in force.

    ``gpus`` is its size now; ``resized`` lists when an admin shrank it, oldest first, as
    (when, GPUs before, GPUs after), so that each stretch counts the size it had then."""

    team_id: int
    cluster_id: int
    gpus: int
    starts_on: datetime.date
    ends_on: datetime.date | None
    ended_at: datetime.datetime | None
    resized: tuple[tuple[datetime.datetime, int, int], ...] = ()
    # What kind of GPU, and which CPU and memory came with them: what chargeback prices.
    gpu_resource: str = ""
    gpu_model: str = ""
    cpu_cores: float | None = None
    memory_gib: int | None = None
    # Replicas each GPU of a shared model is split into (the cluster's capacity sync; 1: not
    # shared, or not known, which counts a replica as a whole GPU).
    replicas: int = 1

    @property
    def share(self) -> float:
        """The share of a whole GPU one of its units is (``gpu_shares.gpu_share``)."""
        return float(gpu_share(self.gpu_resource, self.gpu_model, self.replicas))

    def sizes(
        self, start: datetime.datetime
    ) -> list[tuple[datetime.datetime, datetime.datetime | None, int]]:
        """(from, until or None for on, GPUs) stretches from ``start`` on."""
        stretches = []
        cursor = start
        gpus = self.resized[0][1] if self.resized else self.gpus
        for when, _, after in self.resized:
            if when > cursor:
                stretches.append((cursor, when, gpus))
                cursor = when
            gpus = after
        stretches.append((cursor, None, gpus))
        return stretches


def grant_interval(
    grant: GrantSpan, tz: datetime.tzinfo
) -> tuple[datetime.datetime, datetime.datetime | None]:
    """When the grant was in force: from its first day's midnight to the midnight after its last
    day, or when it was revoked or expired if that came first (None: still open)."""
    start = datetime.datetime.combine(grant.starts_on, datetime.time(), tzinfo=tz)
    end = None
    if grant.ends_on is not None:
        end = datetime.datetime.combine(
            grant.ends_on + datetime.timedelta(days=1), datetime.time(), tzinfo=tz
        )
    if grant.ended_at is not None and (end is None or grant.ended_at < end):
        end = grant.ended_at
    return start, end


def granted_gpu_hours(
    grants: Iterable[GrantSpan], period: Period, *, now: datetime.datetime, tz: datetime.tzinfo
) -> float:
    """GPU-hours the grants allowed within the period, each stretch at the size the grant had
    then, never counting the future."""
    total = 0.0
    for grant in grants:
        total += granted_by_period(grant, (period,), now=now, tz=tz)[0]
    return total


def granted_by_period(
    grant: GrantSpan, periods: Sequence[Period], *, now: datetime.datetime, tz: datetime.tzinfo
) -> list[float]:
    """The GPU-hours one grant allowed within each period (``granted_gpu_hours`` of it alone),
    its interval and sizes worked out once for them all."""
    start, end = grant_interval(grant, tz)
    stretches = grant.sizes(start)
    result = []
    for period in periods:
        period_end = period.end if period.end < now else now
        if start >= period_end or (end is not None and end <= period.start):
            result.append(0.0)  # not in force in the period
            continue
        total = 0.0
        for since, until, gpus in stretches:
            overlap_start = since if since > period.start else period.start
            overlap_end = period_end
            if until is not None and until < overlap_end:
                overlap_end = until
            if end is not None and end < overlap_end:
                overlap_end = end
            if overlap_end > overlap_start:
                total += gpus * (overlap_end - overlap_start).total_seconds() / 3600
        result.append(total)
    return result


def granted_by_periods(
    grants: Sequence[GrantSpan],
    periods: Sequence[Period],
    *,
    now: datetime.datetime,
    tz: datetime.tzinfo,
) -> list[list[float]]:
    """``granted_by_period`` of each grant: the periods' bounds worked out once for them all,
    and a grant never shrunk (the common case) as one stretch in POSIX seconds."""
    bounds = [(p.start.timestamp(), min(p.end, now).timestamp()) for p in periods]
    result = []
    for grant in grants:
        if grant.resized:
            result.append(granted_by_period(grant, periods, now=now, tz=tz))
            continue
        start, end = grant_interval(grant, tz)
        since = start.timestamp()
        until = math.inf if end is None else end.timestamp()
        hours = []
        for period_start, period_end in bounds:
            overlap = (period_end if period_end < until else until) - (
                period_start if period_start > since else since
            )
            hours.append(grant.gpus * overlap / 3600 if overlap > 0 else 0.0)
        result.append(hours)
    return result


@dataclass(slots=True)
class UsageRow:
    """One team's GPU-hours on one cluster in one period. (Not frozen: a report of a thousand
    teams over a year makes some ten thousand of them, and a frozen one takes three times as
    long to make.)"""

    team_slug: str
    team_name: str
    cluster: str
    period: Period
    granted_gpu_hours: float  # GPU equivalents: each grant's hours times its ``share``
    held_gpu_hours: float | None  # None: the cluster's Prometheus could not say
    used_gpu_hours: float | None
    # Held while under the cluster's idle threshold; None unless the report was asked for it.
    idle_gpu_hours: float | None = None
    # The team's grants on the cluster (the same tuple in each of its rows) and each one's
    # granted hours in the period, in its own units (GPUs, slices or replicas: times each
    # grant's share they add up to ``granted_gpu_hours``): what chargeback prices grant by
    # grant. Two flat tuples rather than a pair per grant and row: a report of
    # a thousand teams over a year makes tens of thousands of rows.
    grants: tuple[GrantSpan, ...] = ()
    hours_by_grant: tuple[float, ...] = ()

    @property
    def grant_hours(self) -> tuple[tuple[GrantSpan, float], ...]:
        """Each grant with its granted hours in the period."""
        return tuple(zip(self.grants, self.hours_by_grant, strict=True))

    @property
    def utilisation_percent(self) -> float | None:
        """Used as a share of held: how busy the GPUs the team held really were."""
        return percent_of(self.used_gpu_hours, self.held_gpu_hours)

    @property
    def held_of_granted_percent(self) -> float | None:
        return percent_of(self.held_gpu_hours, self.granted_gpu_hours)


CSV_HEADER = [
    "team", "team_name", "cluster", "period_start", "period_end", "granted_gpu_hours",
    "held_gpu_hours", "used_gpu_hours", "utilisation_percent", "budget_gpu_hours",
    "budget_spent_gpu_hours",
]  # fmt: skip

# A team's budget in GPU-hours and what the period spent of it (None: Prometheus could not say).
BudgetFigures = tuple[float, float | None]


def _number(value: float | None, decimals: int = 3) -> str:
    return "" if value is None else f"{value:.{decimals}f}"


def csv_text(
    rows: Sequence[UsageRow],
    budgets: Mapping[tuple[str, datetime.datetime], BudgetFigures] | None = None,
) -> str:
    """The report as CSV, one line per row; empty cells where Prometheus could not answer.
    ``budgets`` gives (team slug, period start) its budget and spending (empty cells: none)."""
    budgets = budgets or {}
    lines = []
    for row in rows:
        budget, spent = budgets.get((row.team_slug, row.period.start), (None, None))
        lines.append(
            [
                row.team_slug,
                row.team_name,
                row.cluster,
                row.period.start.isoformat(),
                row.period.end.isoformat(),
                _number(row.granted_gpu_hours),
                _number(row.held_gpu_hours),
                _number(row.used_gpu_hours),
                _number(row.utilisation_percent, 1),
                _number(budget),
                _number(spent),
            ]
        )
    return spreadsheets.csv_text(CSV_HEADER, lines)
