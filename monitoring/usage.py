"""The usage report: GPU-hours granted, held and used per team, cluster and period, all in GPU
equivalents (a MIG slice or a shared GPU's replica as its share of a GPU).

Granted hours come from the grants (``monitoring.reports``, pure arithmetic); held and used
hours from Prometheus (``monitoring.measured_hours``, which keeps their settled part).
``usage_report(strict=True)``, behind the API, raises ``PrometheusError`` (the API's 503); the
pages get the granted hours and a message instead.
"""

from __future__ import annotations

import datetime
import functools
import operator
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from django.utils import timezone

from clusters.models import Cluster
from monitoring import reports, selectors, usage_budgets
from monitoring.measured_hours import measured_hours
from monitoring.metrics import metrics_config, prometheus_for, unavailable_message
from monitoring.prometheus import PrometheusError
from tenants.models import Department, QuotaGrant, Team
from tenants.permissions import is_portal_admin
from tenants.selectors import department_teams, teams_visible_to


@dataclass
class UsageReport:
    start: datetime.datetime
    end: datetime.datetime
    bucket: str
    rows: list[reports.UsageRow]
    errors: dict[str, str] = field(default_factory=dict)  # cluster name -> why it has no figures

    @property
    def totals(self) -> dict[str, float]:
        def total(attribute: str) -> float:
            return sum(getattr(r, attribute) or 0 for r in self.rows)

        return {
            "granted_gpu_hours": total("granted_gpu_hours"),
            "held_gpu_hours": total("held_gpu_hours"),
            "used_gpu_hours": total("used_gpu_hours"),
        }

    @functools.cached_property
    def budgets(self) -> dict[tuple[str, datetime.datetime], reports.BudgetFigures]:
        """(team slug, period start) -> its budget and what the period spent of it."""
        return usage_budgets.budget_figures(self.rows)

    def csv(self) -> str:
        return reports.csv_text(self.rows, self.budgets)


def usage_report(
    *,
    user: User | AnonymousUser,
    start: datetime.datetime,
    end: datetime.datetime,
    bucket: str = "total",
    strict: bool = False,
    now: datetime.datetime | None = None,
    department: Department | None = None,
) -> UsageReport:
    """GPU-hours granted, held and used per team the user may see, cluster and period; with
    ``department`` (one the caller found among ``departments_visible_to(user)``), per team of
    that department and those nested in it.

    With ``strict`` a Prometheus failure raises (the API's 503); otherwise the cluster's rows
    show granted hours only and ``errors`` says why.
    """
    return teams_usage_report(
        teams=teams_visible_to(user) if department is None else department_teams(department),
        # Admins see every team: ask for every namespace rather than spell out hundreds of slugs.
        every_team=department is None and is_portal_admin(user),
        start=start,
        end=end,
        bucket=bucket,
        strict=strict,
        now=now,
    )


def teams_usage_report(
    *,
    teams: QuerySet[Team],
    every_team: bool,
    start: datetime.datetime,
    end: datetime.datetime,
    bucket: str = "total",
    strict: bool = False,
    now: datetime.datetime | None = None,
    idle: bool = False,
    clusters: QuerySet[Cluster] | None = None,
) -> UsageReport:
    """``usage_report`` for the given teams, whoever asks (budgets and statements read it for
    every team, with no user), on every cluster or those given. ``every_team`` says the teams
    are all of them, so Prometheus is asked for every namespace. With ``idle`` the rows also
    carry the GPU-hours held under each cluster's idle threshold."""
    report = UsageReport(start=start, end=end, bucket=bucket, rows=[])
    rows = report.rows
    rows.extend(
        usage_rows(
            report,
            teams=teams,
            every_team=every_team,
            strict=strict,
            now=now,
            idle=idle,
            clusters=clusters,
        )
    )
    if any(row.cluster != rows[0].cluster for row in rows):
        # One cluster's rows come in order already (periods, then teams by slug).
        rows.sort(key=lambda r: (r.period.start, r.team_slug, r.cluster))
    return report


def usage_rows(
    report: UsageReport,
    *,
    teams: QuerySet[Team],
    every_team: bool,
    strict: bool = False,
    now: datetime.datetime | None = None,
    idle: bool = False,
    clusters: QuerySet[Cluster] | None = None,
) -> Iterator[reports.UsageRow]:
    """``teams_usage_report``'s rows for the report's range and bucket, as they come: a
    cluster's rows (by period, then team slug) after its Prometheus queries, a cluster that
    could not answer in ``report.errors`` before its rows. For a caller that turns rows into
    something else as it reads them (a statement: a year of a thousand teams is ten thousand
    rows) rather than keeping them all."""
    start, end, bucket = report.start, report.end, report.bucket
    now = now or timezone.now()
    tz = timezone.get_current_timezone()
    periods = reports.periods(start, end, bucket)
    # (pk, slug, name) rows: a thousand model instances cost more than the query.
    team_list = list(teams.order_by("slug").values_list("pk", "slug", "name"))
    namespaces = None if every_team else sorted(slug for _, slug, _ in team_list)
    # The teams as a subquery: a thousand ids spelt out in SQL cost more than the rows. Only
    # the grants in force at some time in the report's range: the others grant nothing in any
    # of its periods (a day of margin either side for time zones; the arithmetic decides).
    grants = selectors.grant_spans(
        QuotaGrant.objects.filter(
            team__in=teams, starts_on__lte=(end + datetime.timedelta(days=1)).date()
        )
        .exclude(ends_on__lt=(start - datetime.timedelta(days=1)).date())
        .exclude(ended_at__lte=start)
    )
    if not team_list:
        return
    cluster_list = list((Cluster.objects.all() if clusters is None else clusters).order_by("name"))
    cluster_ids = {cluster.pk for cluster in cluster_list}
    grants = [grant for grant in grants if grant.cluster_id in cluster_ids]
    # Each team's grants on each cluster with their hours in every period, worked out once per
    # grant and grouped once: not a scan of every grant per team.
    spans: dict[tuple[int, int], tuple[list, list]] = {}
    for grant, hours in zip(
        grants, reports.granted_by_periods(grants, periods, now=now, tz=tz), strict=True
    ):
        team_grants, hour_lists = spans.setdefault((grant.cluster_id, grant.team_id), ([], []))
        team_grants.append(grant)
        hour_lists.append(hours)
    for cluster in cluster_list:
        config = metrics_config(cluster)
        measured: dict[int, tuple[dict, dict]] = {}
        if not cluster.prometheus_url:
            report.errors[cluster.name] = "No Prometheus is configured for this cluster."
        else:
            try:
                with prometheus_for(cluster) as prometheus:
                    for index, period in enumerate(periods):
                        at = min(period.end, now)
                        if at > period.start:
                            measured[index] = measured_hours(
                                prometheus,
                                config,
                                start=period.start.timestamp(),
                                end=at.timestamp(),
                                now=now.timestamp(),
                                namespaces=namespaces,
                                idle_threshold_percent=(
                                    cluster.idle_utilization_percent if idle else None
                                ),
                            )
            except PrometheusError as error:
                if strict:
                    raise
                report.errors[cluster.name] = unavailable_message(error)
                measured = {}
        failed = cluster.name in report.errors
        # Each team's grants, their hours in every period and their shares of a GPU: (slug,
        # name, grants, hour lists, shares), teams in slug order.
        granted_by_team = []
        for pk, slug, name in team_list:
            team_grants, hour_lists = spans.get((cluster.pk, pk), ((), ()))
            shares = tuple(grant.share for grant in team_grants)
            granted_by_team.append((slug, name, tuple(team_grants), hour_lists, shares))
        for index, period in enumerate(periods):
            held, used, *idle_measured = measured.get(index, ({}, {}, {}))
            idle_hours = idle_measured[0] if idle_measured else {}
            in_period = operator.itemgetter(index)
            for slug, name, team_grants, hour_lists, shares in granted_by_team:
                hours = tuple(map(in_period, hour_lists))
                # GPU equivalents, as held hours are measured (a slice as its share of a GPU).
                granted = 0.0
                for share, grant_hours in zip(shares, hours, strict=True):
                    granted += grant_hours if share == 1 else grant_hours * share
                held_hours = None if failed else held.get(slug, 0.0)
                used_hours = None if failed else used.get(slug, 0.0)
                if not (granted or held_hours or used_hours):
                    continue
                yield reports.UsageRow(
                    team_slug=slug,
                    team_name=name,
                    cluster=cluster.name,
                    period=period,
                    granted_gpu_hours=granted,
                    held_gpu_hours=held_hours,
                    used_gpu_hours=used_hours,
                    idle_gpu_hours=(idle_hours.get(slug, 0.0) if idle and not failed else None),
                    grants=team_grants,
                    hours_by_grant=hours,
                )
