"""The periodic budget check: measure every budget's spending, record it where submission
reads it (``BudgetSpend``), and tell the leads once per period at 80% and at 100%.

Safe to run twice at once: each notice is claimed with a conditional update of its period's
row, so only one run sends it."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from billing.budgets import (
    EXHAUSTED_SHARE,
    WARNING_SHARE,
    Spending,
    TeamCoverage,
    budget_words,
    budgets_spending,
)
from billing.models import Budget, BudgetSpend
from monitoring.models import Notification
from monitoring.notifications import notify_team_leads
from tenants.events import EventKind, emit
from tenants.models import Team


@dataclass(frozen=True)
class BudgetCheckResult:
    budget_id: int
    spent_gpu_hours: float
    percent: float | None
    warned: bool
    exhausted: bool


def _notice(spending: Spending, *, exhausted: bool) -> tuple[str, str]:
    budget = spending.budget
    words = budget_words(budget)
    spent = f"{spending.spent_gpu_hours:.1f} GPU-hours held since {spending.period_start}"
    if not exhausted:
        then = "refused" if budget.policy == Budget.Policy.REFUSE else "only opportunistic"
        return f"80% of {words} is spent", f"{spent}: 80% of {words}. At 100% new work is {then}."
    policy = (
        "New work is refused until the period ends or an admin raises the budget."
        if budget.policy == Budget.Policy.REFUSE
        else "New work is accepted only as opportunistic (Kueue) until the period ends."
    )
    return f"{words[0].upper()}{words[1:]} is spent", f"{spent}: all of {words}. {policy}"


def _claim(spend: BudgetSpend, field: str, now: datetime.datetime) -> bool:
    claimed = BudgetSpend.objects.filter(pk=spend.pk, **{f"{field}__isnull": True}).update(
        **{field: now}
    )
    return claimed == 1


def _tell(spending: Spending, teams: list[Team], *, exhausted: bool) -> None:
    subject, body = _notice(spending, exhausted=exhausted)
    kind = Notification.Kind.BUDGET_EXHAUSTED if exhausted else Notification.Kind.BUDGET_WARNING
    for team in teams:
        notify_team_leads(
            team=team,
            kind=kind,
            subject=subject[:200],
            body=body,
            link=reverse("billing-team-budgets", args=[team.slug]),
        )
        emit(
            team_id=team.pk,
            kind=EventKind.BUDGET_EXHAUSTED if exhausted else EventKind.BUDGET_WARNING,
            title=f"{team.slug}: {subject}",
            data={
                "budget_id": spending.budget.pk,
                "period_start": spending.period_start.isoformat(),
                "spent_gpu_hours": round(spending.spent_gpu_hours, 3),
                "budget_gpu_hours": str(spending.budget.gpu_hours),
                "percent": None if spending.percent is None else round(spending.percent, 1),
                "policy": spending.budget.policy,
            },
            link=reverse("billing-team-budgets", args=[team.slug]),
        )


def budgets_check(
    *, now: datetime.datetime | None = None, budget_ids: list[int] | None = None
) -> list[BudgetCheckResult]:
    """Measure the budgets (all, or those named), record their spending for this period, and
    tell the leads of their teams when a budget passes 80% and 100%, once per period each."""
    now = now or timezone.now()
    budgets = Budget.objects.select_related("team", "department").order_by("pk")
    if budget_ids is not None:
        budgets = budgets.filter(pk__in=budget_ids)
    spendings = budgets_spending(list(budgets), now=now)
    coverage = TeamCoverage.load()
    teams = {t.pk: t for t in Team.objects.filter(archived_at__isnull=True)}
    results = []
    for spending in spendings:
        budget = spending.budget
        share = spending.share
        with transaction.atomic():
            spend, _ = BudgetSpend.objects.update_or_create(
                budget=budget,
                period_start=spending.period_start,
                defaults={"spent_gpu_hours": spending.spent_gpu_hours, "checked_at": now},
            )
            covered = [teams[pk] for pk in sorted(coverage.team_ids(budget)) if pk in teams]
            warned = share >= WARNING_SHARE and _claim(spend, "warned_at", now)
            if warned and share < EXHAUSTED_SHARE:
                _tell(spending, covered, exhausted=False)
            exhausted = share >= EXHAUSTED_SHARE and _claim(spend, "exhausted_at", now)
            if exhausted:
                _tell(spending, covered, exhausted=True)
            if share < EXHAUSTED_SHARE and spend.exhausted_at is not None:
                # An admin raised the budget: new work is admitted again (and the leads hear
                # again should it run out a second time this period).
                BudgetSpend.objects.filter(pk=spend.pk).update(exhausted_at=None)
        results.append(
            BudgetCheckResult(
                budget_id=budget.pk,
                spent_gpu_hours=spending.spent_gpu_hours,
                percent=spending.percent,
                warned=warned,
                exhausted=exhausted,
            )
        )
    return results
