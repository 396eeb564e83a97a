"""The budget columns of the usage report's CSV: each team's budget and what it spent.

Budgets live in ``billing``, which reads the usage report, so this app never imports it: billing
registers, in its ``AppConfig.ready``, a function giving a report's rows their budget figures
(the pattern of ``tenants.impact``). With none registered the columns stay empty."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence

from monitoring.reports import BudgetFigures, UsageRow

# rows -> {(team slug, period start): (budget GPU-hours, spent GPU-hours or None)}, a
# constant number of queries whatever the rows.
Provider = Callable[[Sequence[UsageRow]], dict[tuple[str, datetime.datetime], BudgetFigures]]

_providers: list[Provider] = []


def register(provider: Provider) -> None:
    """Give the usage CSV its budget columns (one provider: a second replaces the first)."""
    _providers[:] = [provider]


def budget_figures(
    rows: Sequence[UsageRow],
) -> dict[tuple[str, datetime.datetime], BudgetFigures]:
    if not rows or not _providers:
        return {}
    return _providers[0](rows)
