"""Usage-decayed fair sharing of idle GPUs in Kueue mode: pure arithmetic, no database.

Kueue gives an idle GPU to the opportunistic ClusterQueue whose dominant resource share after
admission (GPUs borrowed over ``spec.fairSharing.weight``) is the lowest. Its own usage decay
(admission fair sharing) only orders the LocalQueues inside one ClusterQueue, so it cannot rank
teams; the portal computes each team's recent use itself and lowers the weight its
opportunistic queue borrows with:

* **decayed use**: the GPU-hours of the team's opportunistic jobs on the cluster, each moment
  weighted ``0.5 ** (age / half-life)``: an hour used one half-life ago counts as half an hour.
  For a job that held ``g`` GPUs from ``start`` to ``end`` (hours ago ``a_end <= a_start``) the
  integral is ``g * H / ln 2 * (2 ** (-a_end / H) - 2 ** (-a_start / H))``. Rounded to whole
  GPU-hours (``rounded_use``), so the weight does not change (and the ClusterQueue is not
  rewritten) for every minute a job runs;
* **borrowing weight**: ``weight / (1 + decayed use / scale)``: a team that used ``scale``
  decayed GPU-hours borrows with half its weight, at Kueue's precision of a thousandth and never
  below it (``borrowing_weight``).

The guaranteed queue keeps the plain weight: it never borrows, so the weight only matters to
the opportunistic one.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

# Kueue keeps a weight as a quantity in thousandths.
WEIGHT_STEP = Decimal("0.001")
# Beyond this many half-lives a GPU-hour counts for less than a thousandth: not read at all.
HORIZON_HALF_LIVES = 10


@dataclass(frozen=True)
class Use:
    """GPUs (whole-GPU equivalents) held from ``start`` to ``end`` (None: still held)."""

    start: datetime.datetime
    end: datetime.datetime | None
    gpus: float


def horizon(*, now: datetime.datetime, half_life_hours: float) -> datetime.datetime:
    """The oldest moment whose use still counts (for the reads to bound what they read)."""
    return now - datetime.timedelta(hours=half_life_hours * HORIZON_HALF_LIVES)


def decayed_gpu_hours(
    uses: Iterable[Use], *, now: datetime.datetime, half_life_hours: float
) -> float:
    """The decayed GPU-hours of ``uses`` as of ``now`` (what is after ``now`` does not count).
    With a half-life of 0 (off): the plain GPU-hours."""
    total = 0.0
    for use in uses:
        end = min(use.end or now, now)
        if end <= use.start:
            continue
        if half_life_hours <= 0:
            total += use.gpus * (end - use.start).total_seconds() / 3600
            continue
        age_end = (now - end).total_seconds() / 3600
        age_start = (now - use.start).total_seconds() / 3600
        total += (
            use.gpus
            * half_life_hours
            / math.log(2)
            * (2 ** (-age_end / half_life_hours) - 2 ** (-age_start / half_life_hours))
        )
    return total


def rounded_use(gpu_hours: float) -> int:
    """Decayed use as the weight sees it: whole GPU-hours."""
    return int(Decimal(str(gpu_hours)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def borrowing_weight(weight: Decimal, *, decayed_use: int, scale_gpu_hours: int) -> Decimal:
    """The weight the team's opportunistic queue borrows with: ``weight / (1 + use / scale)``,
    in thousandths, never below one."""
    effective = Decimal(weight) / (1 + Decimal(decayed_use) / Decimal(max(scale_gpu_hours, 1)))
    return max(effective.quantize(WEIGHT_STEP, rounding=ROUND_HALF_UP), WEIGHT_STEP)


def share(borrowed: float, weight: Decimal) -> float:
    """Kueue's ranking figure for a borrower: GPUs borrowed over its weight."""
    return float(borrowed) / float(weight)


@dataclass(frozen=True)
class Day:
    """One day of a team's borrowing: the GPU-hours its opportunistic jobs held that day and
    its decayed use at the day's end."""

    date: datetime.date
    gpu_hours: float
    decayed_use: float


def daily_history(
    uses: list[Use],
    *,
    days: list[tuple[datetime.date, datetime.datetime, datetime.datetime]],
    now: datetime.datetime,
    half_life_hours: float,
) -> list[Day]:
    """Per day (date, its start, its end; the last may end after ``now``): the GPU-hours held
    within it and the decayed use at its end (at ``now`` for today)."""
    history = []
    for date, start, end in days:
        end = min(end, now)
        held = sum(
            use.gpus * max((min(use.end or now, end) - max(use.start, start)).total_seconds(), 0)
            for use in uses
        )
        decayed = decayed_gpu_hours(
            (u for u in uses if u.start < end), now=end, half_life_hours=half_life_hours
        )
        history.append(Day(date=date, gpu_hours=held / 3600, decayed_use=decayed))
    return history
