"""Budgets at submission: new work of a team with a spent budget (its own, or a department's
above it) is refused, or on a Kueue cluster accepted only as opportunistic, as the budget's
policy says. What is spent is what the last budget check recorded (``BudgetSpend``): no
Prometheus query on the way in.

A budget of one GPU model applies to work asking for that model; a budget of every model to
all work."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from billing import selectors
from billing.budgets import budget_words
from billing.models import Budget, BudgetSpend
from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import OPPORTUNISTIC
from tenants.models import Team


def spent_budgets(*, team: Team, gpu_model: str = "") -> list[tuple[Budget, BudgetSpend]]:
    """The team's spent budgets this period (its own and its departments'), for work of the
    model (empty: work naming no model, which only every-model budgets cover)."""
    budgets = list(selectors.budgets_of_team(team).filter(gpu_model__in={"", gpu_model}))
    spends = selectors.current_spends(budgets)
    return [
        (budget, spends[budget.pk])
        for budget in budgets
        if budget.pk in spends and spends[budget.pk].exhausted_at is not None
    ]


def budget_refusal(
    *, team: Team, cluster: Cluster, gpu_model: str = "", priority: str = ""
) -> str | None:
    """Why the team's budgets refuse this work now, or None. ``priority`` is the kind of work
    (empty: work that cannot be opportunistic, such as a service or a session)."""
    for budget, spend in spent_budgets(team=team, gpu_model=gpu_model):
        spent = f"{spend.spent_gpu_hours:.1f} GPU-hours held since {spend.period_start}"
        if budget.policy == Budget.Policy.REFUSE:
            return (
                f"Budget spent: {budget_words(budget)} is used up ({spent}), so new work is "
                "refused until the period ends or an admin raises the budget."
            )
        kueue = cluster.quota_mode == QuotaMode.KUEUE
        if kueue and priority == OPPORTUNISTIC:
            continue
        if not kueue:
            where = f"cluster {cluster.name} runs no opportunistic work (it is not in Kueue mode)"
        elif priority:
            where = (
                "submit it as opportunistic work (it runs on GPUs other teams leave idle and "
                "may be preempted)"
            )
        else:
            where = "only jobs can be opportunistic, so no new service or GPU session starts"
        return (
            f"Budget spent: {budget_words(budget)} is used up ({spent}), so only "
            f"opportunistic work is accepted: {where}."
        )
    return None


def check_budgets(
    *, team: Team, cluster: Cluster, gpu_model: str = "", priority: str = "", field: str = "gpus"
) -> None:
    """Refuse (a ValidationError naming ``field`` and the budget) work the budgets refuse."""
    refusal = budget_refusal(team=team, cluster=cluster, gpu_model=gpu_model, priority=priority)
    if refusal:
        raise ValidationError({field: refusal})
