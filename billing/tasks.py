"""Celery tasks: small, safe to run twice. The work itself lives in ``budget_checks``."""

from dataclasses import asdict

from celery import shared_task

from billing import budget_checks


@shared_task(acks_late=True)
def check_budgets(budget_ids: list[int] | None = None) -> list[dict]:
    """Run by Celery beat (``check-budgets``) for every budget, or for the budgets named (after
    an admin changes one): record their spending, tell the leads at 80% and 100%."""
    return [asdict(r) for r in budget_checks.budgets_check(budget_ids=budget_ids)]
