"""Budget periods: calendar months and quarters (pure, no I/O)."""

from __future__ import annotations

import datetime

MONTH = "month"
QUARTER = "quarter"
MONTHS = {MONTH: 1, QUARTER: 3}


def add_months(day: datetime.date, months: int) -> datetime.date:
    """The first day of the month ``months`` after ``day``'s."""
    index = day.year * 12 + day.month - 1 + months
    return datetime.date(index // 12, index % 12 + 1, 1)


def period_start(kind: str, day: datetime.date) -> datetime.date:
    """The first day of the month or quarter ``day`` is in."""
    if kind == QUARTER:
        return datetime.date(day.year, 3 * ((day.month - 1) // 3) + 1, 1)
    return day.replace(day=1)


def period_end(kind: str, start: datetime.date) -> datetime.date:
    """The first day after the period that starts on ``start``."""
    return add_months(start, MONTHS[kind])


def projected(
    spent: float, *, start: datetime.datetime, end: datetime.datetime, now: datetime.datetime
) -> float:
    """What the period will have spent at its end if it goes on at the rate it has so far."""
    elapsed = (min(now, end) - start).total_seconds()
    if elapsed <= 0:
        return spent
    return spent * (end - start).total_seconds() / elapsed
