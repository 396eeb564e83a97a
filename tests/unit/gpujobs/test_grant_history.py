"""The suggested size and the hours a grant was in force: pure arithmetic."""

import datetime

import pytest

from gpujobs.grant_history import HEADROOM, hours_in_force, suggest
from monitoring.reports import GrantSpan, Period
from tenants.review_history import UseWindow

UTC = datetime.UTC


def window(**figures) -> UseWindow:
    values = {
        "days": 90,
        "granted_gpu_hours": 8 * 720.0,
        "hours_in_force": 720.0,
        "held_gpu_hours": 720.0,
        "used_gpu_hours": 300.0,
        "jobs": 20,
        "jobs_waited": 1,
        "waited_minutes": 10,
    }
    values.update(figures)
    return UseWindow(**values)


def test_the_suggestion_is_the_average_held_with_headroom_rounded_up():
    # 720 GPU-hours held in 720 h: 1 GPU on average, 1.25 with headroom, so 2.
    suggestion = suggest(16, window())

    assert suggestion.gpus == 2
    assert "1.00 GPUs on average" in suggestion.arithmetic
    assert f"{HEADROOM:.2f}" in suggestion.arithmetic
    assert "1 of 20 jobs waited over 10 min" in suggestion.arithmetic


@pytest.mark.parametrize(
    ("asked", "held", "expected"),
    [(16, 0.0, 1), (16, 720.0 * 3.2, 4), (3, 720.0 * 6, 3), (16, 720.0 * 2.4, 3)],
    ids=["held-nothing-still-one", "exact", "never-more-than-asked", "rounded-up"],
)
def test_the_suggestion_stays_between_one_and_the_ask(asked, held, expected):
    assert suggest(asked, window(held_gpu_hours=held)).gpus == expected


def test_a_team_whose_jobs_often_waited_gets_what_it_asked():
    suggestion = suggest(16, window(jobs=8, jobs_waited=2))

    assert suggestion.gpus == 16
    assert "2 of 8 jobs waited" in suggestion.arithmetic


def test_without_a_grant_or_a_measurement_the_suggestion_is_the_ask():
    assert suggest(6, window(granted_gpu_hours=0.0, hours_in_force=0.0)).gpus == 6
    assert suggest(6, window(held_gpu_hours=None, used_gpu_hours=None)).gpus == 6


def test_the_window_computes_its_percentages():
    figures = window(held_gpu_hours=1440.0, used_gpu_hours=360.0)

    assert figures.held_percent == pytest.approx(25)
    assert figures.utilisation_percent == pytest.approx(25)
    assert window(held_gpu_hours=None).utilisation_percent is None


def grant(starts_on, ends_on=None, ended_at=None):
    return GrantSpan(
        team_id=1, cluster_id=1, gpus=4, starts_on=starts_on, ends_on=ends_on, ended_at=ended_at
    )


def test_hours_in_force_count_overlapping_grants_once_and_clip_to_the_window():
    period = Period(
        datetime.datetime(2026, 11, 1, tzinfo=UTC), datetime.datetime(2026, 12, 1, tzinfo=UTC)
    )
    grants = [
        grant(datetime.date(2026, 10, 1), datetime.date(2026, 11, 10)),  # Nov 1-10: 10 days
        grant(datetime.date(2026, 11, 5), datetime.date(2026, 11, 14)),  # adds Nov 11-14
        grant(
            datetime.date(2026, 11, 20), ended_at=datetime.datetime(2026, 11, 21, 12, tzinfo=UTC)
        ),
    ]

    assert hours_in_force(grants, period, tz=UTC) == pytest.approx(14 * 24 + 36)
    assert hours_in_force([], period, tz=UTC) == 0
