"""Monthly chargeback statements per team and per department.

One usage report (``monitoring.usage.usage_rows``, bucketed by month, with idle hours, each
row priced as it comes rather than all kept) gives every figure; a handful of reads give the
prices, teams, clusters and departments; the rest is ``billing.pricing`` over rows. The number
of queries does not grow with the teams or the months."""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db.models import QuerySet
from django.utils import timezone

from billing import pricing
from billing.models import Price
from billing.periods import add_months
from clusters.models import Cluster, GpuModelCapacity
from clusters.vocabulary import SHARED_GPU_RESOURCE
from core import spreadsheets
from monitoring.usage import UsageReport, usage_rows
from tenants.models import Department, Team


@dataclass(slots=True)
class StatementLine:
    """One team's month on one cluster (``cluster`` empty: all its clusters together)."""

    team_slug: str
    team_name: str
    department_slug: str
    cluster: str
    month: datetime.date
    costing: pricing.Costing


@dataclass(slots=True)
class DepartmentLine:
    """One department's month: its teams' and nested departments' teams' lines summed."""

    department_slug: str
    department_name: str
    month: datetime.date
    costing: pricing.Costing


@dataclass
class Statement:
    months: list[datetime.date]
    lines: list[StatementLine]
    departments: list[DepartmentLine]
    errors: dict[str, str] = field(default_factory=dict)

    def team_totals(self) -> list[StatementLine]:
        """A line per team and month, its clusters summed."""
        totals: dict[tuple[str, datetime.date], StatementLine] = {}
        for line in self.lines:
            key = (line.team_slug, line.month)
            if key not in totals:
                totals[key] = StatementLine(
                    line.team_slug,
                    line.team_name,
                    line.department_slug,
                    "",
                    line.month,
                    pricing.Costing(),
                )
            totals[key].costing.add(line.costing)
        return sorted(totals.values(), key=lambda line: (line.month, line.team_slug))


def _midnight(day: datetime.date, tz: datetime.tzinfo) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(), tzinfo=tz)


def price_book() -> pricing.PriceBook:
    """Every price, and the replicas each shared GPU model is split into (the most any cluster
    says: a shared grant's share of a GPU)."""
    rows = Price.objects.values_list(
        "gpu_model", "effective_from", "gpu_hour", "cpu_core_hour", "memory_gib_hour"
    )
    return pricing.PriceBook(
        (pricing.PriceRow(*row) for row in rows), replicas=shared_gpu_replicas()
    )


def shared_gpu_replicas() -> dict[str, int]:
    """Shared GPU model -> replicas per GPU, from the capacity sync's rows."""
    replicas: dict[str, int] = {}
    for model, count in GpuModelCapacity.objects.filter(
        resource_name=SHARED_GPU_RESOURCE
    ).values_list("gpu_model", "replicas"):
        replicas[model] = max(replicas.get(model, 1), count)
    return replicas


def department_ancestors(parents: dict[int, int | None], department_id: int | None) -> list[int]:
    """The department and every department above it, nearest first (a cycle stops the walk)."""
    chain: list[int] = []
    while department_id is not None and department_id not in chain:
        chain.append(department_id)
        department_id = parents.get(department_id)
    return chain


def department_lines(
    lines: Iterable[StatementLine],
    *,
    team_departments: dict[str, int | None],
    departments: Sequence[tuple[int, str, str, int | None]],
) -> list[DepartmentLine]:
    """Each department's months: every line of its teams and its nested departments' teams.
    ``departments`` are (id, slug, name, parent id) rows."""
    parents = {pk: parent for pk, _, _, parent in departments}
    named = {pk: (slug, name) for pk, slug, name, _ in departments}
    # Each team's lines into its own department first, then each department's own total into
    # every department above it: far fewer sums than each line into every ancestor.
    own_lines: dict[tuple[int, datetime.date], list[pricing.Costing]] = defaultdict(list)
    for line in lines:
        department_id = team_departments.get(line.team_slug)
        if department_id is not None:
            own_lines[(department_id, line.month)].append(line.costing)
    own: dict[tuple[int, datetime.date], pricing.Costing] = {}
    for key, costings in own_lines.items():
        own[key] = pricing.Costing()
        own[key].add_all(costings)
    sums: dict[tuple[int, datetime.date], pricing.Costing] = defaultdict(pricing.Costing)
    for (department_id, month), costing in own.items():
        for above in department_ancestors(parents, department_id):
            sums[(above, month)].add(costing)
    result = [
        DepartmentLine(named[pk][0], named[pk][1], month, total)
        for (pk, month), total in sums.items()
    ]
    return sorted(result, key=lambda line: (line.month, line.department_slug))


def monthly_statement(
    *,
    first_month: datetime.date,
    months: int = 1,
    teams: QuerySet[Team] | None = None,
    clusters: QuerySet[Cluster] | None = None,
    now: datetime.datetime | None = None,
) -> Statement:
    """Statements for ``months`` calendar months from ``first_month`` for the teams (all of
    them when None) on the clusters (all of them when None), and for every department above
    them. Months still running count up to
    ``now``; a cluster whose Prometheus could not answer has granted figures only and an entry
    in ``errors``."""
    now = now or timezone.now()
    tz = timezone.get_current_timezone()
    first = first_month.replace(day=1)
    month_list = [add_months(first, i) for i in range(months)]
    every_team = teams is None
    teams = Team.objects.all() if teams is None else teams
    report = UsageReport(
        start=_midnight(first, tz),
        end=_midnight(add_months(first, months), tz),
        bucket="month",
        rows=[],
    )
    rows = usage_rows(
        report, teams=teams, every_team=every_team, now=now, idle=True, clusters=clusters
    )
    prices = price_book()
    team_rows = {
        slug: (pk, name, department_id)
        for pk, slug, name, department_id in teams.values_list(
            "pk", "slug", "name", "department_id"
        )
    }
    departments = list(Department.objects.values_list("pk", "slug", "name", "parent_id"))
    department_slugs = {pk: slug for pk, slug, _, _ in departments}
    team_department_slugs = {
        slug: department_slugs.get(department_id, "")
        for slug, (_, _, department_id) in team_rows.items()
    }
    month_of = {}
    lines = []
    for row in rows:
        period = row.period
        month = month_of.get(period.start)
        if month is None:
            month = month_of[period.start] = period.start.date()
        lines.append(
            StatementLine(
                team_slug=row.team_slug,
                team_name=row.team_name,
                department_slug=team_department_slugs[row.team_slug],
                cluster=row.cluster,
                month=month,
                costing=pricing.costing(
                    grant_hours=row.grant_hours,
                    period=period,
                    held=row.held_gpu_hours,
                    used=row.used_gpu_hours,
                    idle=row.idle_gpu_hours,
                    prices=prices,
                    now=now,
                    tz=tz,
                ),
            )
        )
    if any(line.cluster != lines[0].cluster for line in lines):
        # One cluster's rows come by month and team; several clusters' one after the other.
        lines.sort(key=lambda line: (line.month, line.team_slug, line.cluster))
    rollups = department_lines(
        lines,
        team_departments={slug: row[2] for slug, row in team_rows.items()},
        departments=departments,
    )
    return Statement(month_list, lines, rollups, errors=dict(report.errors))


CSV_HEADER = [
    "scope", "name", "department", "cluster", "month", "granted_gpu_hours",
    "reserved_gpu_hours", "held_gpu_hours", "held_gpu_equivalent_hours", "used_gpu_hours",
    "idle_gpu_hours", "idle_share_percent", "reserved_cost", "used_cost", "idle_cost",
]  # fmt: skip


def _number(value: float | None, decimals: int = 3) -> str:
    return "" if value is None else f"{value:.{decimals}f}"


def _cells(c: pricing.Costing) -> list[str]:
    return [
        _number(c.granted_gpu_hours),
        _number(c.reserved_gpu_hours),
        _number(c.held_gpu_hours),
        _number(c.held_gpu_equivalent_hours),
        _number(c.used_gpu_hours),
        _number(c.idle_gpu_hours),
        _number(c.idle_share_percent, 1),
        str(pricing.money(c.reserved_cost)),
        str(pricing.money(c.used_cost)),
        str(pricing.money(c.idle_cost)),
    ]


def csv_text(statement: Statement) -> str:
    """The statement as CSV: a line per team, cluster and month, then per department and month."""
    lines = []
    for line in sorted(statement.lines, key=lambda x: (x.month, x.team_slug, x.cluster)):
        lines.append(
            [
                "team",
                line.team_slug,
                line.department_slug,
                line.cluster,
                line.month.strftime("%Y-%m"),
                *_cells(line.costing),
            ]
        )
    for line in statement.departments:
        lines.append(
            [
                "department",
                line.department_slug,
                line.department_slug,
                "",
                line.month.strftime("%Y-%m"),
                *_cells(line.costing),
            ]
        )
    return spreadsheets.csv_text(CSV_HEADER, lines)
