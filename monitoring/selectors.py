"""Reads for monitoring pages: which clusters have metrics, what a team is granted, a user's
notifications. Which teams a user may see is ``tenants.selectors``' business."""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from clusters.vocabulary import SHARED_GPU_RESOURCE
from monitoring import reports
from monitoring.models import IdlePod, Notification
from tenants.models import AuditEvent, QuotaGrant, Team


def clusters_with_metrics() -> QuerySet[Cluster]:
    """Clusters whose Prometheus the portal knows."""
    return Cluster.objects.exclude(prometheus_url="").order_by("name")


def gpus_on_cluster(cluster: Cluster) -> int:
    """The GPUs (of every resource kind) the cluster's nodes report, as last read: how large a
    heatmap of them would be."""
    total = GpuCapacity.objects.filter(cluster=cluster).aggregate(total=Sum("allocatable"))
    return total["total"] or 0


def team_clusters(team: Team) -> list[Cluster]:
    """Clusters with metrics where the team has been granted GPUs, then the other clusters
    with metrics: the first one is where the team most likely runs."""
    clusters = list(clusters_with_metrics())
    granted = set(QuotaGrant.objects.filter(team=team).values_list("cluster_id", flat=True))
    return sorted(clusters, key=lambda c: (c.pk not in granted, c.name))


def _grants_in_force(
    *, team: Team, cluster: Cluster, today: datetime.date | None
) -> QuerySet[QuotaGrant]:
    today = today or timezone.localdate()
    return QuotaGrant.objects.filter(
        Q(ends_on__isnull=True) | Q(ends_on__gte=today),
        team=team,
        cluster=cluster,
        state=QuotaGrant.State.ACTIVE,
        starts_on__lte=today,
    )


def gpus_granted_now(*, team: Team, cluster: Cluster, today: datetime.date | None = None) -> int:
    """GPU units the team's active grants on the cluster give it today (every GPU kind, a MIG
    slice or a shared GPU's replica counting one): the API's ``gpus_granted``."""
    grants = _grants_in_force(team=team, cluster=cluster, today=today)
    return grants.aggregate(total=Sum("gpus"))["total"] or 0


def gpu_equivalents_granted_now(
    *, team: Team, cluster: Cluster, today: datetime.date | None = None
) -> float:
    """GPU equivalents the team's active grants on the cluster give it today: each grant's
    units times its share of a GPU (``GrantSpan.share``), what GPUs held are measured in."""
    grants = grant_spans(_grants_in_force(team=team, cluster=cluster, today=today))
    return float(sum(grant.gpus * grant.share for grant in grants))


def shared_gpu_replicas(cluster_ids: Iterable[int]) -> dict[tuple[int, str], int]:
    """(cluster id, shared GPU model) -> replicas per GPU, from the capacity sync's rows; and
    (cluster id, "") the fewest of the cluster's, for a shared grant of no model in particular
    (the largest share it may have been given)."""
    replicas: dict[tuple[int, str], int] = {}
    rows = GpuModelCapacity.objects.filter(
        cluster_id__in=list(cluster_ids), resource_name=SHARED_GPU_RESOURCE, replicas__gt=1
    ).values_list("cluster_id", "gpu_model", "replicas")
    for cluster_id, model, count in rows:
        replicas[cluster_id, model] = count
        replicas[cluster_id, ""] = min(replicas.get((cluster_id, ""), count), count)
    return replicas


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
    """The grants with their size history, read from the audit trail of their shrinks, and a
    shared grant's replicas per GPU (``shared_gpu_replicas``: what its share of a GPU is)."""
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
    shared = {row[2] for row in rows if row[7] == SHARED_GPU_RESOURCE}
    replicas = shared_gpu_replicas(shared) if shared else {}
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
            replicas=replicas.get((row[2], row[8]), 1) if row[7] == SHARED_GPU_RESOURCE else 1,
        )
        for row in rows
    ]
