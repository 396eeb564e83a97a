"""The arithmetic of usage-decayed fair sharing (``reconcile.fair_share``) and the weight it
puts on a team's opportunistic ClusterQueue (``reconcile.queue_manifests``)."""

import datetime
import math
from decimal import Decimal

import pytest

from clusters.vocabulary import GUARANTEED, OPPORTUNISTIC
from reconcile.fair_share import (
    Use,
    borrowing_weight,
    daily_history,
    decayed_gpu_hours,
    horizon,
    rounded_use,
    share,
)
from reconcile.queue_manifests import QueuePolicy

NOW = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.UTC)


def hours_ago(hours: float) -> datetime.datetime:
    return NOW - datetime.timedelta(hours=hours)


def test_without_decay_use_is_plain_gpu_hours():
    use = Use(hours_ago(10), hours_ago(2), gpus=4)

    assert decayed_gpu_hours([use], now=NOW, half_life_hours=0) == pytest.approx(32)


def test_an_hour_one_half_life_ago_counts_half():
    # A thin slice of an hour one half-life (24 h) back: its weight is 0.5.
    use = Use(hours_ago(24.001), hours_ago(23.999), gpus=1)

    assert decayed_gpu_hours([use], now=NOW, half_life_hours=24) == pytest.approx(0.001, rel=1e-3)


def test_the_closed_form_matches_the_integral():
    use = Use(hours_ago(12), hours_ago(2), gpus=8)
    h = 24
    expected = 8 * h / math.log(2) * (2 ** (-2 / h) - 2 ** (-12 / h))
    steps = 10_000
    riemann = sum(8 * 0.5 ** ((2 + 10 * (i + 0.5) / steps) / h) * 10 / steps for i in range(steps))

    assert decayed_gpu_hours([use], now=NOW, half_life_hours=h) == pytest.approx(expected)
    assert expected == pytest.approx(riemann, rel=1e-6)
    assert rounded_use(expected) == 66


def test_a_running_job_counts_up_to_now_and_nothing_after():
    running = Use(hours_ago(1), None, gpus=2)
    future = Use(NOW + datetime.timedelta(hours=1), None, gpus=2)

    assert decayed_gpu_hours([running, future], now=NOW, half_life_hours=0) == pytest.approx(2)


def test_use_beyond_the_horizon_counts_for_less_than_a_thousandth():
    old = Use(horizon(now=NOW, half_life_hours=6) - datetime.timedelta(hours=1),
              horizon(now=NOW, half_life_hours=6), gpus=1)  # fmt: skip

    assert decayed_gpu_hours([old], now=NOW, half_life_hours=6) < 0.001


@pytest.mark.parametrize(
    ("weight", "use", "scale", "expected"),
    [
        ("1", 0, 100, "1.000"),
        ("1", 100, 100, "0.500"),  # the scale's worth of use halves the weight
        ("3", 310, 100, "0.732"),
        ("1", 66, 100, "0.602"),
        ("0.001", 5000, 100, "0.001"),  # never below Kueue's precision
    ],
)
def test_the_borrowing_weight_is_the_weight_over_one_plus_use_over_scale(
    weight, use, scale, expected
):
    assert borrowing_weight(Decimal(weight), decayed_use=use, scale_gpu_hours=scale) == Decimal(
        expected
    )


def test_use_is_rounded_to_whole_gpu_hours_so_minutes_do_not_rewrite_the_queue():
    assert rounded_use(65.4) == rounded_use(64.6) == 65
    assert rounded_use(0.49) == 0


def test_only_the_opportunistic_queue_borrows_with_the_lowered_weight():
    policy = QueuePolicy(fair_sharing_weight=Decimal(2), borrowing_weight=Decimal("0.8"))

    assert policy.weight(GUARANTEED) == Decimal(2)
    assert policy.weight(OPPORTUNISTIC) == Decimal("0.8")
    assert QueuePolicy(fair_sharing_weight=Decimal(2)).weight(OPPORTUNISTIC) == Decimal(2)


def test_share_is_borrowed_over_weight():
    assert share(3, Decimal("1.5")) == 2


def test_the_daily_history_splits_held_hours_by_day_and_decays_to_each_day_end():
    day = datetime.timedelta(days=1)
    start = datetime.datetime(2026, 12, 4, tzinfo=datetime.UTC)
    days = [(start.date() + i * day, start + i * day, start + (i + 1) * day) for i in range(3)]
    # 2 GPUs from 20:00 on the 4th to 04:00 on the 5th: 4 h on each day.
    uses = [Use(start + datetime.timedelta(hours=20), start + datetime.timedelta(hours=28), 2)]

    history = daily_history(uses, days=days, now=NOW, half_life_hours=24)

    assert [round(d.gpu_hours, 6) for d in history] == [8, 8, 0]
    assert history[0].decayed_use == pytest.approx(
        decayed_gpu_hours([Use(uses[0].start, start + day, 2)], now=start + day,
                          half_life_hours=24)
    )  # fmt: skip
    assert history[2].decayed_use < history[1].decayed_use  # decays once nothing runs
