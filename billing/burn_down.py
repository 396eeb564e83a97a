"""A budget's burn-down: the GPU-hours its teams held this period, day by day (week by week
for a quarter), from the usage report as the budget check counts them; the projection at the
current rate; and the DCGM utilisation of those GPUs each day (or week)."""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass

from django.utils import timezone

from billing import periods, pricing
from billing.budgets import TeamCoverage, budget_words
from billing.models import Budget
from monitoring import figures, reports
from monitoring.parts import Chart
from monitoring.usage import teams_usage_report
from tenants.models import Team


@dataclass
class BurnDown:
    budget: Budget
    start: datetime.datetime
    end: datetime.datetime
    bucket: str  # "day" or "week": how far apart the points are
    days: list[datetime.datetime]  # each day's (or week's) end, or now for the current one
    spent: list[float]  # cumulative GPU-hours at each of them
    utilisation: list[float | None]  # percent, each day (or week)
    projected: float
    errors: dict[str, str]

    @property
    def spent_now(self) -> float:
        return self.spent[-1] if self.spent else 0.0

    @property
    def percent(self) -> float | None:
        budget = float(self.budget.gpu_hours)
        return 100 * self.spent_now / budget if budget else None

    def charts(self) -> list[Chart]:
        stamps = [day.timestamp() for day in self.days]
        now_stamp = stamps[-1] if stamps else self.start.timestamp()
        figure = figures.budget_burn_down(
            days=[self.start.timestamp(), *stamps],
            spent=[0.0, *self.spent],
            budget=float(self.budget.gpu_hours),
            period=(self.start.timestamp(), self.end.timestamp()),
            projection=(now_stamp, self.spent_now, self.projected),
            title=f"Burn-down of {budget_words(self.budget)}",
        )
        utilisation = figures.daily_utilisation(
            days=[day.timestamp() for day in self.days],
            percent=self.utilisation,
            title=f"DCGM utilisation of the GPUs held, per {self.bucket}",
        )
        key = f"budget-{self.budget.pk}"
        return [
            Chart(f"{key}-burn-down", "Burn-down", figure_json=figures.to_json(figure)),
            Chart(f"{key}-utilisation", "Utilisation", figure_json=figures.to_json(utilisation)),
        ]


def budget_burn_down(budget: Budget, *, now: datetime.datetime | None = None) -> BurnDown:
    """The budget's period so far, a day (or a week) at a time: one usage report of its teams."""
    now = now or timezone.now()
    tz = timezone.get_current_timezone()
    first = periods.period_start(budget.period, timezone.localdate(now))
    last = periods.period_end(budget.period, first)
    start = datetime.datetime.combine(first, datetime.time(), tzinfo=tz)
    end = datetime.datetime.combine(last, datetime.time(), tzinfo=tz)
    team_ids = TeamCoverage.load().team_ids(budget)
    until = min(now, end)
    # A point a day for a month; a quarter's 92 days would be as many usage queries a page.
    bucket = "day" if budget.period == Budget.Period.MONTH else "week"
    report = teams_usage_report(
        teams=Team.objects.filter(pk__in=team_ids),
        every_team=False,
        start=start,
        end=max(until, start + datetime.timedelta(seconds=1)),
        bucket=bucket,
        now=now,
    )
    held: dict[datetime.datetime, float] = defaultdict(float)
    raw_held: dict[datetime.datetime, float] = defaultdict(float)
    used: dict[datetime.datetime, float] = defaultdict(float)
    day_ends = [min(p.end, until) for p in reports.periods(start, report.end, bucket)]
    for row in report.rows:
        if row.held_gpu_hours is None:
            continue
        day = min(row.period.end, until)
        held[day] += pricing.budget_gpu_hours(row, budget.gpu_model, now=now, tz=tz)
        raw_held[day] += row.held_gpu_hours
        used[day] += row.used_gpu_hours or 0.0
    spent, total = [], 0.0
    for day in day_ends:
        total += held[day]
        spent.append(total)
    utilisation = [100 * used[day] / raw_held[day] if raw_held[day] else None for day in day_ends]
    return BurnDown(
        budget=budget,
        start=start,
        end=end,
        bucket=bucket,
        days=day_ends,
        spent=spent,
        utilisation=utilisation,
        projected=periods.projected(total, start=start, end=end, now=now),
        errors=dict(report.errors),
    )
