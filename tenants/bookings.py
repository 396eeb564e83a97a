"""The booking calendar: day by day over a range, a cluster's GPUs of one model (or of any model
of a kind) as capacity, granted (active grants, those starting later included), pending
requests and free; and the earliest window in which a number of GPUs is free for a number of
days.

Reads only, in a constant number of queries whatever the number of teams and days: the grants
(and requests) meeting the range are read once and summed per day in Python (``daily_totals``).

Two ways of counting, each for its question:

* **Per day** (the calendar): what the grants in effect that day hold.
* **Per window** (``earliest_window``): every grant that meets the window counts for the whole
  of it, as the approval's capacity check counts (``quota_checks.check_capacity``, which sums
  the grants overlapping the period). A window found here is one that approval accepts; it can
  start later than the calendar's free days suggest when grants that do not overlap each other
  both meet it.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, replace

from django.core.exceptions import ValidationError
from django.db.models import Q

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from tenants.models import QuotaGrant, QuotaRequest
from tenants.period_sums import MeetingSums
from tenants.selectors import plannable_gpus

DEFAULT_DAYS = 90
# Twelve months ahead at most: the calendar and the earliest window's search alike.
MAX_DAYS = 366
DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Period:
    """GPUs held (or asked for) from ``starts_on`` to ``ends_on`` inclusive (None: open-ended),
    of one GPU model (empty: any model of the kind)."""

    starts_on: datetime.date
    ends_on: datetime.date | None
    gpus: int
    gpu_model: str = ""


# --- pure arithmetic ---------------------------------------------------------------------------


def daily_totals(periods: Iterable[Period], first: datetime.date, last: datetime.date) -> list[int]:
    """GPUs the periods hold on each day from ``first`` to ``last`` inclusive: one pass over the
    periods (a difference array), then one over the days."""
    length = (last - first).days + 1
    if length <= 0:
        return []
    delta = [0] * (length + 1)
    for period in periods:
        start = max(period.starts_on, first)
        end = last if period.ends_on is None else min(period.ends_on, last)
        if start > end:
            continue
        delta[(start - first).days] += period.gpus
        delta[(end - first).days + 1] -= period.gpus
    totals, running = [], 0
    for change in delta[:length]:
        running += change
        totals.append(running)
    return totals


def window_totals(
    periods: Iterable[Period], first: datetime.date, last: datetime.date, days: int
) -> list[int]:
    """For each start day from ``first`` to ``last``: the GPUs of every period that meets the
    window of ``days`` days beginning then, as the approval's capacity check sums them
    (``period_sums.MeetingSums``)."""
    if first > last or days < 1:
        return []
    sums = MeetingSums.of((p.starts_on, p.ends_on, p.gpus) for p in periods)
    span = datetime.timedelta(days=days - 1)
    starts = (last - first).days + 1
    return [sums.meeting(day, day + span) for day in (first + n * DAY for n in range(starts))]


# --- the figures of one GPU model on one cluster -----------------------------------------------


@dataclass(frozen=True)
class Pool:
    """What a calendar counts against: the GPUs of a kind on a cluster that may be planned
    with, and of one model of it when ``gpu_model`` is set (grants of that model count against
    both, grants of any model against the kind only, as in the capacity check)."""

    cluster: Cluster
    gpu_resource: str
    gpu_model: str
    kind_capacity: int
    kind_plannable: int
    model_capacity: int | None = None
    model_plannable: int | None = None

    @property
    def capacity(self) -> int:
        return self.kind_capacity if self.model_capacity is None else self.model_capacity

    @property
    def plannable(self) -> int:
        return self.kind_plannable if self.model_plannable is None else self.model_plannable

    def free(self, *, kind_held: int, model_held: int) -> int:
        """What is left to grant given what the kind and the model hold (never below 0)."""
        free = self.kind_plannable - kind_held
        if self.model_plannable is not None:
            free = min(free, self.model_plannable - model_held)
        return max(free, 0)


@dataclass(frozen=True)
class CalendarDay:
    day: datetime.date
    granted: int
    pending: int
    free: int


@dataclass(frozen=True)
class Calendar:
    """A pool's days from ``first`` to ``last``: ``granted`` what active grants hold of the
    model (or the kind) each day; ``pending`` what pending requests ask for, shown apart and
    not taken from ``free``."""

    pool: Pool
    first: datetime.date
    last: datetime.date
    days: list[CalendarDay]


@dataclass(frozen=True)
class Window:
    starts_on: datetime.date
    ends_on: datetime.date
    gpus: int
    free: int  # the fewest free GPUs over the window, as the capacity check counts


def calendar_days(
    pool: Pool,
    grants: list[Period],
    pending: list[Period],
    first: datetime.date,
    last: datetime.date,
) -> list[CalendarDay]:
    """The pool's day-by-day figures from ``grants`` of its kind (any model) and ``pending``."""
    kind_held = daily_totals(grants, first, last)
    model_held = (
        kind_held
        if not pool.gpu_model
        else daily_totals([g for g in grants if g.gpu_model == pool.gpu_model], first, last)
    )
    asked = daily_totals(_of_pool(pending, pool), first, last)
    return [
        CalendarDay(
            day=first + index * DAY,
            granted=model_held[index],
            pending=asked[index],
            free=pool.free(kind_held=kind_held[index], model_held=model_held[index]),
        )
        for index in range(len(kind_held))
    ]


def first_window(
    pool: Pool,
    grants: list[Period],
    *,
    gpus: int,
    days: int,
    not_before: datetime.date,
    last_start: datetime.date,
) -> Window | None:
    """The earliest start from ``not_before`` to ``last_start`` from which ``gpus`` are free
    for ``days`` days as approval counts them (``window_totals``), or None."""
    kind_held = window_totals(grants, not_before, last_start, days)
    model_held = (
        kind_held
        if not pool.gpu_model
        else window_totals(
            [g for g in grants if g.gpu_model == pool.gpu_model], not_before, last_start, days
        )
    )
    for index, (kind, model) in enumerate(zip(kind_held, model_held, strict=True)):
        free = pool.free(kind_held=kind, model_held=model)
        if free >= gpus:
            start = not_before + index * DAY
            return Window(starts_on=start, ends_on=start + (days - 1) * DAY, gpus=gpus, free=free)
    return None


def window_words(window: Window | None, *, gpus: int, days: int) -> str:
    """The earliest window's answer in words, for pages and the API."""
    if window is None:
        return (
            f"No window of {days} day(s) with {gpus} GPU(s) free starts within the next "
            f"{MAX_DAYS} days."
        )
    return (
        f"{gpus} GPU(s) are free for {days} day(s) from {window.starts_on.isoformat()} to "
        f"{window.ends_on.isoformat()}."
    )


def _of_pool(periods: list[Period], pool: Pool) -> list[Period]:
    if not pool.gpu_model:
        return periods
    return [p for p in periods if p.gpu_model == pool.gpu_model]


# --- reading the database ----------------------------------------------------------------------


def check_range(
    *,
    first: datetime.date,
    last: datetime.date,
    today: datetime.date,
    first_field: str = "start",
    last_field: str = "end",
) -> None:
    """A range of days to show or to book: not in the past, not ending before it starts, at
    most ``MAX_DAYS`` long. One ``ValidationError`` naming every bad field."""
    errors = {}
    if first < today:
        errors[first_field] = f"Must not be in the past (today is {today.isoformat()})."
    if last < first:
        errors[last_field] = f"Must not be before the start date ({first.isoformat()})."
    elif (last - first).days + 1 > MAX_DAYS:
        errors[last_field] = (
            f"At most {MAX_DAYS} days from the start date ({(first + (MAX_DAYS - 1) * DAY)})."
        )
    if errors:
        raise ValidationError(errors)


def pool_of(
    *, cluster: Cluster, gpu_resource: str = DEFAULT_GPU_RESOURCE, gpu_model: str = ""
) -> Pool:
    """The cluster's GPUs of a kind (and of a model of it) to plan with; a ``ValidationError``
    on ``gpu_resource`` or ``gpu_model`` when the cluster has none. Two queries."""
    kinds = {row.resource_name: row for row in GpuCapacity.objects.filter(cluster=cluster)}
    kind = kinds.get(gpu_resource)
    if kind is None:
        offered = ", ".join(sorted(kinds)) or "none"
        raise ValidationError(
            {
                "gpu_resource": (
                    f"Cluster {cluster.name} has no GPUs of kind {gpu_resource!r}; it offers: "
                    f"{offered}."
                )
            }
        )
    pool = Pool(
        cluster=cluster,
        gpu_resource=gpu_resource,
        gpu_model=gpu_model,
        kind_capacity=kind.capacity,
        kind_plannable=plannable_gpus(kind.capacity, cluster.overcommit_ratio),
    )
    if not gpu_model:
        return pool
    models = {
        row.gpu_model: row
        for row in GpuModelCapacity.objects.filter(cluster=cluster, resource_name=gpu_resource)
    }
    row = models.get(gpu_model)
    if row is None:
        raise ValidationError(
            {
                "gpu_model": (
                    f"No node of cluster {cluster.name} has GPU model {gpu_model!r} "
                    f"({gpu_resource}); its models are: {', '.join(sorted(models)) or 'none'}. "
                    "Leave it empty for any model."
                )
            }
        )
    capacity = min(row.allocatable, kind.capacity)
    return replace(
        pool,
        model_capacity=capacity,
        model_plannable=plannable_gpus(capacity, cluster.overcommit_ratio),
    )


def _meeting(first: datetime.date, last: datetime.date) -> Q:
    return Q(starts_on__lte=last) & (Q(ends_on__isnull=True) | Q(ends_on__gte=first))


def grant_periods(pool: Pool, first: datetime.date, last: datetime.date) -> list[Period]:
    """Active grants of the pool's kind on its cluster (every model: they all count against
    the kind) that meet the range. One query, on the active-grant index."""
    rows = QuotaGrant.objects.filter(
        _meeting(first, last),
        cluster=pool.cluster,
        gpu_resource=pool.gpu_resource,
        state=QuotaGrant.State.ACTIVE,
    ).values_list("starts_on", "ends_on", "gpus", "gpu_model")
    return [Period(*row) for row in rows]


def pending_periods(pool: Pool, first: datetime.date, last: datetime.date) -> list[Period]:
    """Pending requests of the pool's kind on its cluster that meet the range. One query."""
    rows = QuotaRequest.objects.filter(
        _meeting(first, last),
        cluster=pool.cluster,
        gpu_resource=pool.gpu_resource,
        state=QuotaRequest.State.PENDING,
    ).values_list("starts_on", "ends_on", "gpus", "gpu_model")
    return [Period(*row) for row in rows]


def booking_calendar(
    *,
    cluster: Cluster,
    today: datetime.date,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
    gpu_model: str = "",
    first: datetime.date | None = None,
    last: datetime.date | None = None,
    with_pending: bool = True,
) -> Calendar:
    """The pool's calendar from ``first`` (default today) to ``last`` (default ``DEFAULT_DAYS``
    days on): four queries at most, whatever the number of teams, grants and days."""
    first = first or today
    horizon = today + (MAX_DAYS - 1) * DAY
    if first > horizon:
        raise ValidationError(
            {"start": f"Must be within {MAX_DAYS} days of today (by {horizon.isoformat()})."}
        )
    last = last or first + (DEFAULT_DAYS - 1) * DAY
    check_range(first=first, last=last, today=today)
    pool = pool_of(cluster=cluster, gpu_resource=gpu_resource, gpu_model=gpu_model)
    grants = grant_periods(pool, first, last)
    pending = pending_periods(pool, first, last) if with_pending else []
    return Calendar(
        pool=pool, first=first, last=last, days=calendar_days(pool, grants, pending, first, last)
    )


def earliest_window(
    *,
    cluster: Cluster,
    gpus: int,
    days: int,
    today: datetime.date,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
    gpu_model: str = "",
    not_before: datetime.date | None = None,
) -> Window | None:
    """The first window of ``days`` days, starting on or after ``not_before`` (default today)
    and within ``MAX_DAYS`` of today, in which ``gpus`` GPUs of the pool are free for the whole
    window as approval counts them; None when there is none within that horizon. Three
    queries."""
    not_before = not_before or today
    errors = {}
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        errors["gpus"] = "Must be a whole number of GPUs, at least 1."
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_DAYS:
        errors["days"] = f"Must be a whole number of days from 1 to {MAX_DAYS}."
    last_start = today + (MAX_DAYS - 1) * DAY
    if not_before < today:
        errors["not_before"] = f"Must not be in the past (today is {today.isoformat()})."
    elif not_before > last_start:
        errors["not_before"] = f"Must be within {MAX_DAYS} days of today ({last_start})."
    if errors:
        raise ValidationError(errors)
    pool = pool_of(cluster=cluster, gpu_resource=gpu_resource, gpu_model=gpu_model)
    grants = grant_periods(pool, not_before, last_start + (days - 1) * DAY)
    return first_window(
        pool, grants, gpus=gpus, days=days, not_before=not_before, last_start=last_start
    )
