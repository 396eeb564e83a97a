"""The budget columns of the usage report's CSV (``monitoring.usage_budgets``), filled in here.

A row's team shows its own budget: its monthly one before its quarterly one, of every model
before one of a single model (a department's budgets are on the department's statement, not
on each team's rows). Spent is what that budget counts of the period's held hours, on all the
team's clusters together: GPU equivalents (a MIG slice as its share of a GPU), of the budget's
model only when it names one, as ``billing.budgets`` counts them. One query whatever the rows."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence

from django.utils import timezone

from billing import pricing
from billing.models import Budget
from monitoring.reports import BudgetFigures, UsageRow


def _preference(budget: tuple[str, str, str, object]) -> tuple[bool, bool]:
    _, period, gpu_model, _ = budget
    return (period != Budget.Period.MONTH, gpu_model != "")


def team_budgets(rows: Iterable[tuple[str, str, str, object]]) -> dict[str, tuple[str, float]]:
    """Each team's budget shown in the CSV, from (team slug, period, GPU model, GPU-hours)
    rows: its GPU model and GPU-hours."""
    chosen: dict[str, tuple[str, str, str, object]] = {}
    for row in rows:
        slug = row[0]
        if slug not in chosen or _preference(row) < _preference(chosen[slug]):
            chosen[slug] = row
    return {slug: (gpu_model, float(hours)) for slug, _, gpu_model, hours in chosen.values()}


def budget_figures_of(
    rows: Sequence[UsageRow], budgets: dict[str, tuple[str, float]], *, now: datetime.datetime
) -> dict[tuple[str, datetime.datetime], BudgetFigures]:
    """(team slug, period start) -> (budget GPU-hours, spent GPU-hours) for the teams with a
    budget; spent is None where no cluster's Prometheus could say."""
    tz = timezone.get_current_timezone()
    spent: dict[tuple[str, datetime.datetime], float | None] = {}
    for row in rows:
        if row.team_slug not in budgets:
            continue
        key = (row.team_slug, row.period.start)
        if row.held_gpu_hours is None:
            spent.setdefault(key, None)
            continue
        gpu_model, _ = budgets[row.team_slug]
        hours = pricing.budget_gpu_hours(row, gpu_model, now=now, tz=tz)
        spent[key] = (spent.get(key) or 0.0) + hours
    return {key: (budgets[key[0]][1], hours) for key, hours in spent.items()}


def usage_budget_figures(
    rows: Sequence[UsageRow],
) -> dict[tuple[str, datetime.datetime], BudgetFigures]:
    """The provider ``monitoring.usage_budgets`` calls: one query for the rows' teams' budgets."""
    slugs = {row.team_slug for row in rows}
    budgets = team_budgets(
        Budget.objects.filter(team__slug__in=slugs).values_list(
            "team__slug", "period", "gpu_model", "gpu_hours"
        )
    )
    return budget_figures_of(rows, budgets, now=timezone.now())
