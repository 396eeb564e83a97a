"""Budget periods, projections, and reading prices and budgets from what clients send."""

import datetime
from decimal import Decimal

import pytest

from billing import periods
from billing.amounts import read_amount
from billing.pricing import Costing
from billing.statements import StatementLine, department_ancestors, department_lines

UTC = datetime.UTC
D = datetime.date


@pytest.mark.parametrize(
    ("kind", "day", "start", "end"),
    [
        ("month", D(2026, 12, 17), D(2026, 12, 1), D(2027, 1, 1)),
        ("quarter", D(2026, 11, 30), D(2026, 10, 1), D(2027, 1, 1)),
        ("quarter", D(2026, 1, 1), D(2026, 1, 1), D(2026, 4, 1)),
    ],
)  # fmt: skip
def test_a_period_is_the_calendar_month_or_quarter_of_the_day(kind, day, start, end):
    assert periods.period_start(kind, day) == start
    assert periods.period_end(kind, start) == end


def test_the_projection_goes_on_at_the_rate_so_far():
    start = datetime.datetime(2026, 11, 1, tzinfo=UTC)
    end = datetime.datetime(2026, 12, 1, tzinfo=UTC)
    now = datetime.datetime(2026, 11, 11, tzinfo=UTC)  # a third of the month

    assert periods.projected(100.0, start=start, end=end, now=now) == pytest.approx(300.0)
    assert periods.projected(100.0, start=start, end=end, now=end) == pytest.approx(100.0)
    assert periods.projected(0.0, start=start, end=end, now=start) == 0.0


@pytest.mark.parametrize(
    ("value", "amount"),
    [("2.5", Decimal("2.5")), (3, Decimal(3)), ("0", Decimal(0)), ("1.2345", Decimal("1.2345"))],
)
def test_amounts_are_decimals_with_up_to_four_places(value, amount):
    errors = {}
    assert read_amount(value, field="gpu_hour", errors=errors) == amount
    assert errors == {}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-1", "negative"),
        ("1.23456", "4 decimal places"),
        ("abc", "number"),
        ("NaN", "finite"),
        (True, "number"),
        ("", "required"),
        ("1e30", "at most"),
    ],
)
def test_bad_amounts_name_the_field_and_say_why(value, words):
    errors = {}
    assert read_amount(value, field="gpu_hours", errors=errors) is None
    assert words in errors["gpu_hours"]


def test_a_department_sums_its_teams_and_its_nested_departments_teams():
    # 1 (top) > 2 (middle) > 3 (leaf); team a in 3, team b in 2, team c in none.
    departments = [(1, "top", "Top", None), (2, "mid", "Mid", 1), (3, "leaf", "Leaf", 2)]
    month = datetime.date(2026, 11, 1)

    def line(team, held):
        return StatementLine(
            team, team, "", "c", month, Costing(held_gpu_hours=held, used_cost=Decimal(held))
        )

    rolled = department_lines(
        [line("a", 1.0), line("b", 2.0), line("c", 4.0)],
        team_departments={"a": 3, "b": 2, "c": None},
        departments=departments,
    )

    held = {r.department_slug: r.costing.held_gpu_hours for r in rolled}
    assert held == {"leaf": 1.0, "mid": 3.0, "top": 3.0}
    assert {r.department_slug: r.costing.used_cost for r in rolled}["top"] == Decimal(3)


def test_a_cycle_in_departments_stops_the_walk():
    assert department_ancestors({1: 2, 2: 1}, 1) == [1, 2]
