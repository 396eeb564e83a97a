"""``period_sums.MeetingSums`` against the capacity check's definition, period by period: pure,
no database."""

import datetime
import random

from tenants.period_sums import MeetingSums

D = datetime.date(2026, 12, 1)


def day(n: int) -> datetime.date:
    return D + datetime.timedelta(days=n)


def meets(period, starts_on, ends_on) -> bool:
    """As ``selectors.grants_overlapping`` filters: starts by the end, does not end before the
    start."""
    begins, finishes, _ = period
    return (ends_on is None or begins <= ends_on) and (finishes is None or finishes >= starts_on)


def test_a_period_counts_in_full_when_it_meets_the_asked_one_at_all():
    sums = MeetingSums.of([(day(0), day(6), 4), (day(7), day(13), 4), (day(20), None, 2)])

    assert sums.meeting(day(6), day(7)) == 8  # the two that never overlap each other
    assert sums.meeting(day(14), day(19)) == 0  # between them all
    assert sums.meeting(day(19), day(20)) == 2
    assert sums.meeting(day(-5), day(-1)) == 0  # before them all
    assert sums.meeting(day(3), None) == 10  # open-ended: every one from then on


def test_nothing_to_sum_meets_nothing():
    assert MeetingSums.of([]).meeting(day(0), None) == 0


def test_random_periods_sum_as_checking_each_one_does():
    rng = random.Random(20261202)
    for _ in range(200):
        periods = []
        for _ in range(rng.randint(0, 30)):
            begins = day(rng.randint(-40, 40))
            finishes = (
                None if rng.random() < 0.2 else begins + datetime.timedelta(rng.randint(0, 30))
            )
            periods.append((begins, finishes, rng.randint(1, 8)))
        sums = MeetingSums.of(periods)
        starts_on = day(rng.randint(-50, 50))
        ends_on = None if rng.random() < 0.2 else starts_on + datetime.timedelta(rng.randint(0, 40))

        expected = sum(p[2] for p in periods if meets(p, starts_on, ends_on))
        assert sums.meeting(starts_on, ends_on) == expected, (periods, starts_on, ends_on)
