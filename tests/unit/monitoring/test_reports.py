"""Usage report arithmetic: periods, granted GPU-hours, CSV."""

import csv
import datetime
import io

import pytest

from monitoring import reports
from monitoring.reports import GrantSpan, Period, UsageRow

UTC = datetime.UTC


def at(*args):
    return datetime.datetime(*args, tzinfo=UTC)


def test_total_keeps_the_range_whole():
    assert reports.periods(at(2026, 1, 5), at(2026, 2, 3), "total") == [
        Period(at(2026, 1, 5), at(2026, 2, 3))
    ]


def test_days_split_at_midnight_with_partial_ends():
    days = reports.periods(at(2026, 1, 1, 18), at(2026, 1, 3, 6), "day")
    assert [(p.start, p.end) for p in days] == [
        (at(2026, 1, 1, 18), at(2026, 1, 2)),
        (at(2026, 1, 2), at(2026, 1, 3)),
        (at(2026, 1, 3), at(2026, 1, 3, 6)),
    ]


def test_weeks_split_on_mondays():
    weeks = reports.periods(at(2026, 1, 1), at(2026, 1, 20), "week")  # a Thursday
    assert [p.start.date().isoformat() for p in weeks] == [
        "2026-01-01",
        "2026-01-05",
        "2026-01-12",
        "2026-01-19",
    ]


def test_months_split_on_the_first_even_across_a_year_end():
    months = reports.periods(at(2025, 11, 15), at(2026, 2, 10), "month")
    assert [p.start.date().isoformat() for p in months] == [
        "2025-11-15", "2025-12-01", "2026-01-01", "2026-02-01",
    ]  # fmt: skip
    assert months[-1].end == at(2026, 2, 10)


def test_bad_ranges_and_buckets_are_refused():
    with pytest.raises(ValueError, match="end after"):
        reports.periods(at(2026, 1, 2), at(2026, 1, 1), "day")
    with pytest.raises(ValueError, match="bucket"):
        reports.periods(at(2026, 1, 1), at(2026, 1, 2), "hour")
    with pytest.raises(ValueError, match="periods"):
        reports.periods(at(2020, 1, 1), at(2026, 1, 1), "day")


def grant(gpus=4, starts_on=(2026, 1, 1), ends_on=(2026, 1, 31), ended_at=None, resized=()):
    return GrantSpan(
        team_id=1,
        cluster_id=1,
        gpus=gpus,
        starts_on=datetime.date(*starts_on),
        ends_on=datetime.date(*ends_on) if ends_on else None,
        ended_at=ended_at,
        resized=resized,
    )


def hours(grants, start, end, now):
    return reports.granted_gpu_hours(grants, Period(start, end), now=now, tz=UTC)


def test_a_grant_counts_its_gpus_for_every_hour_of_the_period_it_covers():
    assert hours([grant()], at(2026, 1, 10), at(2026, 1, 11), now=at(2026, 3, 1)) == 4 * 24


def test_a_grant_counts_through_the_whole_of_its_last_day():
    period = (at(2026, 1, 31), at(2026, 2, 2))
    assert hours([grant()], *period, now=at(2026, 3, 1)) == 4 * 24


def test_an_open_ended_grant_counts_until_now_and_never_the_future():
    assert hours([grant(ends_on=None)], at(2026, 1, 1), at(2026, 2, 1), now=at(2026, 1, 2, 6)) == (
        4 * 30
    )


def test_a_revoked_grant_stops_counting_when_it_was_revoked():
    revoked = grant(ended_at=at(2026, 1, 1, 12))
    assert hours([revoked], at(2026, 1, 1), at(2026, 1, 2), now=at(2026, 3, 1)) == 4 * 12


def test_a_shrunk_grant_counts_its_old_size_before_the_shrink_and_its_new_size_after():
    shrunk = grant(gpus=2, resized=((at(2026, 1, 10, 6), 8, 2),))
    day = (at(2026, 1, 10), at(2026, 1, 11))
    assert hours([shrunk], *day, now=at(2026, 3, 1)) == 8 * 6 + 2 * 18
    assert hours([shrunk], at(2026, 1, 9), at(2026, 1, 10), now=at(2026, 3, 1)) == 8 * 24
    assert hours([shrunk], at(2026, 1, 11), at(2026, 1, 12), now=at(2026, 3, 1)) == 2 * 24


def test_each_of_several_shrinks_starts_a_stretch_and_a_revoke_still_ends_it():
    resized = ((at(2026, 1, 1, 4), 8, 6), (at(2026, 1, 1, 10), 6, 1))
    shrunk = grant(gpus=1, resized=resized, ended_at=at(2026, 1, 1, 20))
    day = (at(2026, 1, 1), at(2026, 1, 2))
    assert hours([shrunk], *day, now=at(2026, 3, 1)) == 8 * 4 + 6 * 6 + 1 * 10


def test_a_grant_outside_the_period_counts_nothing():
    assert hours([grant()], at(2026, 2, 1), at(2026, 2, 2), now=at(2026, 3, 1)) == 0


def test_utilisation_is_used_as_a_share_of_held():
    period = Period(at(2026, 1, 1), at(2026, 1, 2))
    row = UsageRow(
        "v", "Vision", "c", period, granted_gpu_hours=96, held_gpu_hours=48, used_gpu_hours=12
    )
    assert row.utilisation_percent == 25
    assert row.held_of_granted_percent == 50
    assert UsageRow("v", "V", "c", period, 0, None, None).utilisation_percent is None


def test_csv_has_a_header_and_a_line_per_row_with_empty_cells_for_unknowns():
    period = Period(at(2026, 1, 1), at(2026, 1, 2))
    text = reports.csv_text(
        [
            UsageRow("vision", "Vision", "east", period, 96, 48.5, 12.25),
            UsageRow("speech", "=cmd()", "east", period, 24, None, None),
        ]
    )
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == reports.CSV_HEADER
    assert rows[1] == [
        "vision", "Vision", "east", "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00",
        "96.000", "48.500", "12.250", "25.3", "", "",
    ]  # fmt: skip
    assert rows[2][1] == "'=cmd()"  # never a formula in a spreadsheet
    assert rows[2][6:] == ["", "", "", "", ""]


def test_csv_gives_a_team_its_budget_and_spending_and_empty_cells_without_one():
    period = Period(at(2026, 1, 1), at(2026, 2, 1))
    text = reports.csv_text(
        [
            UsageRow("vision", "Vision", "east", period, 96, 48.5, 12.25),
            UsageRow("vision", "Vision", "west", period, 24, None, None),
            UsageRow("speech", "Speech", "east", period, 24, 3, 1),
        ],
        {("vision", period.start): (100.0, 48.5)},
    )
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][-2:] == ["budget_gpu_hours", "budget_spent_gpu_hours"]
    assert [r[-2:] for r in rows[1:]] == [["100.000", "48.500"], ["100.000", "48.500"], ["", ""]]


def test_granted_by_periods_gives_each_grant_what_granted_by_period_gives_it():
    now = at(2026, 3, 10, 12, 30, 15, 250_000)
    periods = reports.periods(at(2025, 12, 1), at(2026, 5, 1), "month")
    grants = [
        grant(),
        grant(starts_on=(2025, 12, 20), ends_on=None),  # still open: up to now
        grant(ends_on=None, ended_at=at(2026, 2, 3, 7, 15, 1, 500)),  # revoked
        grant(starts_on=(2026, 6, 1), ends_on=None),  # not yet
        grant(ends_on=None, resized=((at(2026, 1, 20, 9), 4, 2), (at(2026, 2, 1), 2, 1))),
    ]
    table = reports.granted_by_periods(grants, periods, now=now, tz=UTC)
    for g, row in zip(grants, table, strict=True):
        assert row == pytest.approx(reports.granted_by_period(g, periods, now=now, tz=UTC))
    assert table[3] == [0.0] * len(periods)
    assert table[1][-1] == 0.0  # April is still to come


def test_a_grants_share_is_its_kinds_share_of_a_gpu():
    def span(resource, model="NVIDIA-A100-SXM4-80GB", replicas=1):
        return GrantSpan(1, 1, 4, datetime.date(2026, 1, 1), None, None, (), resource, model,
                         replicas=replicas)  # fmt: skip

    assert span("nvidia.com/gpu").share == 1
    assert span("nvidia.com/mig-1g.10gb").share == pytest.approx(1 / 7)
    assert span("nvidia.com/gpu.shared", "NVIDIA-A100-SXM4-80GB-SHARED", 4).share == 0.25
    assert span("nvidia.com/gpu.shared", "NVIDIA-A100-SXM4-80GB-SHARED").share == 1  # unknown
