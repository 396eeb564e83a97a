"""Per-revision GPU charts for a service's page: utilisation, framebuffer memory and power of
the GPUs each live revision's replicas hold, one column per revision, so that an A/B test's or a
canary's GPU cost sits beside the stable revision's. The charts are monitoring's pod charts
(``monitoring.dashboards.pod_dashboard``, one line per GPU), for the pods the watcher last
recorded on each revision.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass, field

from django.utils import timezone

from monitoring import dashboards, parts, promql
from serving.models import InferenceService, Revision

CHART_KEYS = ("utilisation", "memory", "power")
WINDOW = datetime.timedelta(hours=1)


@dataclass
class RevisionCharts:
    """One revision's column: its charts, or why there are none."""

    revision: Revision
    charts: list[parts.Chart] = field(default_factory=list)
    unavailable: str = ""
    error: str = ""


def revision_charts(
    service: InferenceService, revisions: list[Revision], *, now: datetime.datetime | None = None
) -> tuple[list[RevisionCharts], str]:
    """A column per revision over the last hour (since the service was created, if later), and
    why there are no charts at all, when there are none."""
    cluster = service.cluster
    if not cluster.prometheus_url:
        return [], f"Cluster {cluster.name} has no Prometheus URL, so there are no GPU metrics."
    end = now or timezone.now()
    start = max(end - WINDOW, service.created_at - datetime.timedelta(minutes=1))
    window = promql.Window(start=start, end=end, label="service")
    # Every revision's queries start before any is read: they are in flight together.
    started = {
        revision.pk: dashboards.pod_dashboard(
            cluster=cluster, namespace=service.team.slug, pod_names=revision.pods, window=window
        )
        for revision in revisions
        if revision.pods
    }
    columns = []
    for revision in revisions:
        column = RevisionCharts(revision=revision)
        if not revision.pods:
            column.unavailable = "No replica runs: no GPU metrics."
            columns.append(column)
            continue
        dashboard = started[revision.pk]
        if dashboard.refused:
            return [], dashboard.refused
        column.charts = [
            dataclasses.replace(chart, key=f"r{revision.number}-{chart.key}")
            for chart in dashboard.charts
            if chart.key in CHART_KEYS
        ]
        column.error = dashboard.error
        columns.append(column)
    return columns, ""
