"""Reads for monitoring pages: which clusters have metrics, what a team is granted, a user's
notifications. Which teams a user may see is ``tenants.selectors``' business."""

from __future__ import annotations

import datetime
from collections import defaultdict

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from clusters.models import Cluster
from monitoring import reports
from monitoring.models import IdlePod, Notification
from tenants.models import AuditEvent, QuotaGrant, Team


def clusters_with_metrics() -> QuerySet[Cluster]:
    """Clusters whose Prometheus the portal knows."""
    return Cluster.objects.exclude(prometheus_url="").order_by("name")


def team_clusters(team: Team) -> list[Cluster]:
    """Clusters with metrics where the team has been granted GPUs, then the other clusters
    with metrics: the first one is where the team most likely runs."""
    clusters = list(clusters_with_metrics())
    granted = set(QuotaGrant.objects.filter(team=team).values_list("cluster_id", flat=True))
    return sorted(clusters, key=lambda c: (c.pk not in granted, c.name))


def gpus_granted_now(*, team: Team, cluster: Cluster, today: datetime.date | None = None) -> int:
    """GPUs the team's active grants on the cluster give it today (every GPU kind)."""
    today = today or timezone.localdate()
    return (
        QuotaGrant.objects.filter(
            Q(ends_on__isnull=True) | Q(ends_on__gte=today),
            team=team,
            cluster=cluster,
            state=QuotaGrant.State.ACTIVE,
            starts_on__lte=today,
        ).aggregate(total=Sum("gpus"))["total"]
        or 0
    )


def open_idle_pods(*, team: Team, cluster: Cluster | None = None) -> QuerySet[IdlePod]:
    """The team's pods the last idle check found idle (and that have not recovered since)."""
    pods = IdlePod.objects.filter(team=team, ended_at__isnull=True)
    if cluster is not None:
        pods = pods.filter(cluster=cluster)
    return pods.select_related("cluster").order_by("first_idle_at", "pod")


def notifications_for(user: User | AnonymousUser) -> QuerySet[Notification]:
    if not user.is_authenticated:
        return Notification.objects.none()
    return Notification.objects.filter(user=user).select_related("team")


def unread_notification_count(user: User | AnonymousUser) -> int:
    return notifications_for(user).filter(read_at__isnull=True).count()


def grant_spans(grants: QuerySet[QuotaGrant]) -> list[reports.GrantSpan]:
    """The grants with their size history, read from the audit trail of their shrinks."""
    rows = list(
        grants.values_list(
            "pk",
            "team_id",
            "cluster_id",
            "gpus",
            "starts_on",
            "ends_on",
            "ended_at",
            "gpu_resource",
            "gpu_model",
            "cpu_cores",
            "memory_gib",
        )
    )
    resized: dict[int, list] = defaultdict(list)
    shrinks = AuditEvent.objects.filter(
        action=AuditEvent.Action.QUOTA_GRANT_SHRUNK,
        target_type=QuotaGrant.__name__,
        target_id__in=grants.values("pk"),
    ).order_by("created_at", "pk")
    for grant_id, at, before, after in shrinks.values_list(
        "target_id", "created_at", "before", "after"
    ):
        if before["gpus"] != after["gpus"]:
            resized[grant_id].append((at, before["gpus"], after["gpus"]))
    return [
        reports.GrantSpan(
            *row[1:7],
            resized=tuple(resized[row[0]]),
            gpu_resource=row[7],
            gpu_model=row[8],
            cpu_cores=None if row[9] is None else float(row[9]),
            memory_gib=row[10],
        )
        for row in rows
    ]
