"""GPUs of the periods (grants, requests) that meet a period, counted as the approval's capacity
check counts them (``selectors.grants_overlapping``): a period meets [s, e] when it starts on
or before e and does not end before s, and it counts in full.

Every period that ends before s started before it too (periods end no earlier than they start),
so the GPUs meeting [s, e] are those of the periods started by e less those of the periods ended
before s: two running sums over the days periods start and end on, each read by bisection.
Pure: what it sums is read elsewhere, grouped by day or not.
"""

from __future__ import annotations

import bisect
import datetime
import itertools
from collections.abc import Iterable, Mapping


class _RunningSum:
    """GPUs per day, summed up to each day."""

    def __init__(self, per_day: Mapping[datetime.date, int]) -> None:
        self.days = sorted(per_day)
        self.sums = list(itertools.accumulate(per_day[day] for day in self.days))

    def through(self, day: datetime.date) -> int:
        """GPUs of the days up to ``day``, ``day`` included."""
        index = bisect.bisect_right(self.days, day)
        return self.sums[index - 1] if index else 0

    def before(self, day: datetime.date) -> int:
        """GPUs of the days before ``day``."""
        index = bisect.bisect_left(self.days, day)
        return self.sums[index - 1] if index else 0

    @property
    def total(self) -> int:
        return self.sums[-1] if self.sums else 0


class MeetingSums:
    """``meeting(s, e)``: GPUs of the periods that meet [s, e] (``e`` None: open-ended), from
    the GPUs of the periods starting on each day and of those ending on each day."""

    def __init__(
        self,
        started_on: Mapping[datetime.date, int],
        ended_on: Mapping[datetime.date, int],
    ) -> None:
        self._started = _RunningSum(started_on)
        self._ended = _RunningSum(ended_on)

    @classmethod
    def of(cls, periods: Iterable[tuple[datetime.date, datetime.date | None, int]]) -> MeetingSums:
        """From (starts on, ends on or None, GPUs) of each period."""
        started_on: dict[datetime.date, int] = {}
        ended_on: dict[datetime.date, int] = {}
        for starts_on, ends_on, gpus in periods:
            started_on[starts_on] = started_on.get(starts_on, 0) + gpus
            if ends_on is not None:
                ended_on[ends_on] = ended_on.get(ends_on, 0) + gpus
        return cls(started_on, ended_on)

    def meeting(self, starts_on: datetime.date, ends_on: datetime.date | None) -> int:
        started = self._started.total if ends_on is None else self._started.through(ends_on)
        return started - self._ended.before(starts_on)
