"""Budgets: setting them (admins only, validated, audited) and what each has spent.

Spending is the GPU-hours the budget's teams held in the period, as the usage report measures
them (``billing.statements``, MIG slices as their share of a GPU); a budget of one GPU model
counts the held hours shared to that model's grants (``billing.pricing.held_by_model``)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from celery import current_app
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from billing import periods
from billing.amounts import read_amount
from billing.models import Budget
from billing.statements import department_ancestors, monthly_statement
from core import spreadsheets
from tenants.audit import audit, snapshot
from tenants.models import AuditEvent, Department, Team
from tenants.permissions import is_portal_admin

# The shares of a budget at which the leads hear of it.
WARNING_SHARE = 0.8
EXHAUSTED_SHARE = 1.0


def check_budget_fields(
    *, team: Team | None, department: Department | None, period, gpu_model, gpu_hours, policy
) -> dict:
    """The budget's fields, cleaned; one ValidationError naming every bad one."""
    errors: dict[str, str] = {}
    if (team is None) == (department is None):
        errors["team"] = "Give a team or a department (one of them)."
    elif team is not None and team.archived_at is not None:
        errors["team"] = f"Team {team.slug} is archived."
    if period not in Budget.Period.values:
        errors["period"] = f"Must be one of: {', '.join(Budget.Period.values)} ({period!r})."
    if policy not in Budget.Policy.values:
        errors["policy"] = f"Must be one of: {', '.join(Budget.Policy.values)} ({policy!r})."
    if not isinstance(gpu_model, str) or len(gpu_model) > 200:
        errors["gpu_model"] = "A GPU model name of at most 200 characters (empty: every model)."
    hours = read_amount(gpu_hours, field="gpu_hours", errors=errors)
    if errors:
        raise ValidationError(errors)
    return {"period": period, "gpu_model": gpu_model.strip(), "gpu_hours": hours, "policy": policy}


def budget_set(
    *,
    actor: User,
    team: Team | None = None,
    department: Department | None = None,
    period: str = Budget.Period.MONTH,
    gpu_model: str = "",
    gpu_hours,
    policy: str = Budget.Policy.REFUSE,
) -> Budget:
    """Give a team or a department a GPU-hour budget per month or quarter (of one GPU model,
    or of all), or change the one it has for that period and model."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can set budgets.")
    cleaned = check_budget_fields(
        team=team,
        department=department,
        period=period,
        gpu_model=gpu_model,
        gpu_hours=gpu_hours,
        policy=policy,
    )
    with transaction.atomic():
        budget = (
            Budget.objects.select_for_update()
            .filter(
                team=team,
                department=department,
                period=cleaned["period"],
                gpu_model=cleaned["gpu_model"],
            )
            .first()
        )
        before = snapshot(budget) if budget else None
        budget = budget or Budget(team=team, department=department)
        for name, value in cleaned.items():
            setattr(budget, name, value)
        budget.updated_by = actor
        budget.save()
        after = snapshot(budget)
        if before != after:
            audit(
                actor=actor,
                action=AuditEvent.Action.BUDGET_SET,
                target=budget,
                team=team,
                before=before,
                after=after,
            )
            budget_id = budget.pk
            # Measure it now rather than at the next beat: a lowered budget may be spent.
            transaction.on_commit(lambda: _request_check(budget_id), robust=True)
    return budget


def _request_check(budget_id: int) -> None:
    current_app.tasks["billing.tasks.check_budgets"].delay(budget_ids=[budget_id])


def budget_delete(*, actor: User, budget: Budget) -> None:
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can remove budgets.")
    with transaction.atomic():
        before = snapshot(budget)
        audit(
            actor=actor,
            action=AuditEvent.Action.BUDGET_DELETED,
            target=budget,
            team=budget.team,
            before=before,
            after=None,
        )
        budget.delete()


def budget_owner(budget: Budget) -> str:
    if budget.team_id:
        return f"team {budget.team.slug}"
    return f"department {budget.department.slug}"


def budget_words(budget: Budget) -> str:
    """How a message names the budget: "the monthly budget of 100 H100 GPU-hours of team x"."""
    model = f" {budget.gpu_model}" if budget.gpu_model else ""
    period = "monthly" if budget.period == Budget.Period.MONTH else "quarterly"
    return (
        f"the {period} budget of {budget.gpu_hours.normalize():f}{model} GPU-hours of "
        f"{budget_owner(budget)}"
    )


@dataclass(frozen=True)
class TeamCoverage:
    """Which teams each department covers, nested departments included."""

    team_departments: dict[int, int | None]
    parents: dict[int, int | None]

    @classmethod
    def load(cls) -> TeamCoverage:
        return cls(
            dict(Team.objects.values_list("pk", "department_id")),
            dict(Department.objects.values_list("pk", "parent_id")),
        )

    def team_ids(self, budget: Budget) -> set[int]:
        if budget.team_id:
            return {budget.team_id}
        return {
            team_id
            for team_id, department_id in self.team_departments.items()
            if budget.department_id in department_ancestors(self.parents, department_id)
        }


@dataclass(frozen=True)
class Spending:
    budget: Budget
    period_start: datetime.date
    period_end: datetime.date
    spent_gpu_hours: float

    @property
    def share(self) -> float:
        """Spent over budget (a budget of 0 is spent at once)."""
        budget = float(self.budget.gpu_hours)
        if budget <= 0:
            return float("inf") if self.spent_gpu_hours > 0 else EXHAUSTED_SHARE
        return self.spent_gpu_hours / budget

    @property
    def percent(self) -> float | None:
        return None if self.share == float("inf") else 100 * self.share


def spent_of(budget: Budget, lines: Iterable, *, team_slugs: set[str], since: datetime.date):
    """GPU-hours the lines (a statement's) give the budget: its teams' from ``since`` on."""
    total = 0.0
    for line in lines:
        if line.team_slug not in team_slugs or line.month < since:
            continue
        costing = line.costing
        if budget.gpu_model:
            total += costing.held_by_model.get(budget.gpu_model, 0.0)
        else:
            total += costing.held_gpu_equivalent_hours or 0.0
    return total


def budgets_spending(
    budgets: Sequence[Budget], *, now: datetime.datetime | None = None
) -> list[Spending]:
    """What each budget has spent in its period so far: one usage report over every team from
    the earliest period's start (a quarter's, when any budget is quarterly)."""
    now = now or timezone.now()
    today = timezone.localdate(now)
    if not budgets:
        return []
    starts = {b.pk: periods.period_start(b.period, today) for b in budgets}
    first = min(starts.values())
    months = (today.year - first.year) * 12 + today.month - first.month + 1
    statement = monthly_statement(first_month=first, months=months, now=now)
    coverage = TeamCoverage.load()
    slugs = dict(Team.objects.values_list("pk", "slug"))
    result = []
    for budget in budgets:
        team_slugs = {slugs[pk] for pk in coverage.team_ids(budget)}
        spent = spent_of(budget, statement.lines, team_slugs=team_slugs, since=starts[budget.pk])
        result.append(
            Spending(
                budget=budget,
                period_start=starts[budget.pk],
                period_end=periods.period_end(budget.period, starts[budget.pk]),
                spent_gpu_hours=spent,
            )
        )
    return result


CSV_HEADER = [
    "id", "team", "department", "period", "gpu_model", "gpu_hours", "policy", "period_start",
    "spent_gpu_hours", "spent_percent", "checked_at", "exhausted",
]  # fmt: skip


def csv_text(rows: Iterable[Mapping]) -> str:
    """Budgets with their spending (as the API gives them) as CSV, one line per budget."""
    return spreadsheets.csv_text(CSV_HEADER, ([row[name] for name in CSV_HEADER] for row in rows))
