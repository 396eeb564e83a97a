"""The booking calendar's arithmetic (``tenants.bookings``): pure, no database."""

import datetime
import random

from tenants.bookings import (
    Period,
    Pool,
    calendar_days,
    daily_totals,
    first_window,
    window_totals,
)

D = datetime.date(2026, 12, 1)


def day(n: int) -> datetime.date:
    return D + datetime.timedelta(days=n)


def pool(kind: int = 8, model: int | None = None, gpu_model: str = "") -> Pool:
    return Pool(
        cluster=None,
        gpu_resource="nvidia.com/gpu",
        gpu_model=gpu_model,
        kind_capacity=kind,
        kind_plannable=kind,
        model_capacity=model,
        model_plannable=model,
    )


def test_a_period_counts_on_each_of_its_days_and_not_outside_them():
    totals = daily_totals([Period(day(2), day(4), 3)], day(0), day(6))

    assert totals == [0, 0, 3, 3, 3, 0, 0]


def test_open_ended_and_earlier_periods_are_clipped_to_the_range():
    periods = [Period(day(-10), None, 2), Period(day(-5), day(1), 1), Period(day(9), None, 7)]

    assert daily_totals(periods, day(0), day(3)) == [3, 3, 2, 2]


def test_overlapping_periods_add_up():
    periods = [Period(day(0), day(9), 4), Period(day(5), day(14), 4)]

    assert daily_totals(periods, day(3), day(7)) == [4, 4, 8, 8, 8]


def test_a_window_counts_every_period_that_meets_it_as_the_capacity_check_does():
    # Two grants that never overlap each other both meet a window spanning them.
    periods = [Period(day(0), day(6), 4), Period(day(7), day(13), 4)]

    totals = window_totals(periods, day(0), day(10), days=4)

    assert totals[0] == 4  # days 0-3: the first only
    assert totals[4] == 8  # days 4-7: both
    assert totals[7] == 4  # days 7-10: the second only


def test_window_and_daily_totals_agree_with_counting_by_hand():
    rng = random.Random(14)
    for _ in range(200):
        periods = []
        for _ in range(rng.randint(0, 8)):
            start = day(rng.randint(-20, 40))
            end = None if rng.random() < 0.2 else start + datetime.timedelta(rng.randint(0, 15))
            periods.append(Period(start, end, rng.randint(1, 5)))
        first, last, length = day(0), day(rng.randint(0, 30)), rng.randint(1, 10)

        def meets(p, s, e):
            return p.starts_on <= e and (p.ends_on is None or p.ends_on >= s)

        n = (last - first).days + 1
        assert daily_totals(periods, first, last) == [
            sum(p.gpus for p in periods if meets(p, day(i), day(i))) for i in range(n)
        ]
        assert window_totals(periods, first, last, length) == [
            sum(p.gpus for p in periods if meets(p, day(i), day(i + length - 1))) for i in range(n)
        ]


def test_calendar_days_show_granted_pending_and_free():
    grants = [Period(day(1), day(2), 6)]
    pending = [Period(day(2), day(3), 5)]

    days = calendar_days(pool(8), grants, pending, day(0), day(3))

    assert [(d.granted, d.pending, d.free) for d in days] == [
        (0, 0, 8),
        (6, 0, 2),
        (6, 5, 2),
        (0, 5, 8),
    ]
    assert days[0].day == day(0)


def test_a_model_is_free_only_as_far_as_its_kind_is():
    # 8 GPUs of the kind, 4 of them H100; 6 GPUs of any model granted on day 1.
    grants = [Period(day(1), day(1), 6), Period(day(0), day(0), 3, "H100")]

    days = calendar_days(pool(8, 4, "H100"), grants, [], day(0), day(1))

    assert [(d.granted, d.free) for d in days] == [(3, 1), (0, 2)]


def test_overbooking_shows_no_negative_free():
    days = calendar_days(pool(4), [Period(day(0), None, 6)], [], day(0), day(0))

    assert days[0].free == 0


def test_the_earliest_window_starts_once_enough_is_free_for_its_whole_length():
    grants = [Period(day(0), day(9), 6)]

    window = first_window(pool(8), grants, gpus=4, days=7, not_before=day(0), last_start=day(60))

    assert (window.starts_on, window.ends_on, window.free) == (day(10), day(16), 8)


def test_no_window_within_the_horizon_is_none():
    grants = [Period(day(0), None, 6)]

    assert (
        first_window(pool(8), grants, gpus=4, days=1, not_before=day(0), last_start=day(365))
        is None
    )


def test_the_earliest_window_of_a_model_respects_the_kind_too():
    grants = [Period(day(0), day(4), 7)]  # any model: the kind has 1 left until day 4

    window = first_window(
        pool(8, 4, "H100"), grants, gpus=2, days=2, not_before=day(0), last_start=day(30)
    )

    assert window.starts_on == day(5)
