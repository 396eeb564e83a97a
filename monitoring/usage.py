"""The usage report: GPU-hours granted, held and used per team, cluster and period.

Granted hours come from the grants (``monitoring.reports``, pure arithmetic); held and used
hours from Prometheus. ``usage_report(strict=True)``, behind the API, raises
``PrometheusError`` (the API's 503); the pages get the granted hours and a message instead.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone

from clusters.models import Cluster
from monitoring import promql, reports, selectors
from monitoring.metrics import metrics_config, prometheus_for, unavailable_message
from monitoring.prometheus import PrometheusClient, PrometheusError
from tenants.models import Department, QuotaGrant
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

    def csv(self) -> str:
        return reports.csv_text(self.rows)


def _measured_hours(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    period: reports.Period,
    *,
    at: datetime.datetime,
    namespaces: list[str] | None,
) -> tuple[dict[str, float], dict[str, float]]:
    """GPU-hours held and used per namespace in the period up to ``at``."""
    seconds = (at - period.start).total_seconds()
    resolution = settings.MONITORING_USAGE_RESOLUTION_SECONDS
    filters = {"namespaces": namespaces} if namespaces is not None else {"held": True}
    measured = []
    for build in (promql.gpu_seconds_held, promql.gpu_seconds_used):
        query = build(config, period_seconds=seconds, resolution=resolution, **filters)
        samples = prometheus.query(query, at=at.timestamp())
        measured.append(
            {
                s.labels.get(config.labels.namespace, ""): s.value / 3600
                for s in samples
                if not math.isnan(s.value)
            }
        )
    return measured[0], measured[1]


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
    now = now or timezone.now()
    tz = timezone.get_current_timezone()
    periods = reports.periods(start, end, bucket)
    scope = teams_visible_to(user) if department is None else department_teams(department)
    teams = list(scope.order_by("slug"))
    by_slug = {t.slug: t for t in teams}
    # Admins see every team: ask for every namespace rather than spell out hundreds of slugs.
    everyone = department is None and is_portal_admin(user)
    namespaces = None if everyone else sorted(by_slug)
    # The teams as a subquery: a thousand ids spelt out in SQL cost more than the rows.
    grants = selectors.grant_spans(QuotaGrant.objects.filter(team__in=scope))
    report = UsageReport(start=start, end=end, bucket=bucket, rows=[])
    if not teams:
        return report
    # Each team's grants on each cluster, grouped once: not a scan of every grant per team.
    spans: dict[tuple[int, int], list] = {}
    for grant in grants:
        spans.setdefault((grant.cluster_id, grant.team_id), []).append(grant)
    for cluster in Cluster.objects.order_by("name"):
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
                            measured[index] = _measured_hours(
                                prometheus, config, period, at=at, namespaces=namespaces
                            )
            except PrometheusError as error:
                if strict:
                    raise
                report.errors[cluster.name] = unavailable_message(error)
                measured = {}
        failed = cluster.name in report.errors
        for index, period in enumerate(periods):
            held, used = measured.get(index, ({}, {}))
            for team in teams:
                granted = reports.granted_gpu_hours(
                    spans.get((cluster.pk, team.pk), []), period, now=now, tz=tz
                )
                held_hours = None if failed else held.get(team.slug, 0.0)
                used_hours = None if failed else used.get(team.slug, 0.0)
                if not (granted or held_hours or used_hours):
                    continue
                report.rows.append(
                    reports.UsageRow(
                        team_slug=team.slug,
                        team_name=team.name,
                        cluster=cluster.name,
                        period=period,
                        granted_gpu_hours=granted,
                        held_gpu_hours=held_hours,
                        used_gpu_hours=used_hours,
                    )
                )
    report.rows.sort(key=lambda r: (r.period.start, r.team_slug, r.cluster))
    return report
