"""Reads for billing's pages and API: which budgets and statements a user may see."""

from __future__ import annotations

import datetime

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet
from django.utils import timezone

from billing import periods, statements
from billing.models import Budget, BudgetSpend, Price
from tenants.models import Department, Team
from tenants.permissions import is_portal_admin
from tenants.selectors import teams_visible_to


def prices() -> QuerySet[Price]:
    return Price.objects.order_by("gpu_model", "-effective_from")


def statement_for(
    user: User | AnonymousUser, *, first_month: datetime.date, months: int
) -> statements.Statement:
    """The monthly statement ``user`` may read: every team and department for an admin; for
    anyone else the teams they see and no department (a department's total needs all its
    teams)."""
    admin = is_portal_admin(user)
    statement = statements.monthly_statement(
        first_month=first_month,
        months=months,
        teams=None if admin else teams_visible_to(user),
    )
    if not admin:
        statement.departments = []
    return statement


def budgets_visible_to(user: User | AnonymousUser) -> QuerySet[Budget]:
    """Admins see every budget; others their teams' and their teams' departments' (nested)."""
    budgets = Budget.objects.select_related("team", "department").order_by("pk")
    if is_portal_admin(user):
        return budgets
    teams = teams_visible_to(user)
    parents = dict(Department.objects.values_list("pk", "parent_id"))
    departments: set[int] = set()
    for department_id in teams.exclude(department=None).values_list("department_id", flat=True):
        departments.update(statements.department_ancestors(parents, department_id))
    return budgets.filter(Q(team__in=teams) | Q(department_id__in=departments))


def budgets_of_team(team: Team) -> QuerySet[Budget]:
    """The budgets the team spends against: its own and its departments' (nested)."""
    departments: list[int] = []
    if team.department_id is not None:
        parents = dict(Department.objects.values_list("pk", "parent_id"))
        departments = statements.department_ancestors(parents, team.department_id)
    return (
        Budget.objects.filter(Q(team=team) | Q(department_id__in=departments))
        .select_related("team", "department")
        .order_by("pk")
    )


def current_spends(
    budgets: list[Budget], *, today: datetime.date | None = None
) -> dict[int, BudgetSpend]:
    """Each budget's recorded spending this period (the last budget check's), by budget id."""
    today = today or timezone.localdate()
    spends = BudgetSpend.objects.filter(
        Q(budget__period=periods.MONTH, period_start=periods.period_start(periods.MONTH, today))
        | Q(
            budget__period=periods.QUARTER,
            period_start=periods.period_start(periods.QUARTER, today),
        ),
        budget__in=[b.pk for b in budgets],
    )
    return {spend.budget_id: spend for spend in spends}
