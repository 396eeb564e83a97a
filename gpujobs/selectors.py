"""Reads: which jobs a user may see, and what a team's quota has left for new ones."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from clusters.models import Cluster, GpuCapacity
from gpujobs.models import GpuJob
from gpujobs.observe import ACTIVE_STATES
from tenants.models import QuotaGrant, Team
from tenants.permissions import is_portal_admin


def jobs_visible_to(user: User | AnonymousUser) -> QuerySet[GpuJob]:
    """Admins see every job; everyone else the jobs of the teams they belong to (any role)."""
    jobs = GpuJob.objects.select_related("team", "cluster", "submitted_by")
    if is_portal_admin(user):
        return jobs
    if not user.is_authenticated:
        return jobs.none()
    return jobs.filter(team__memberships__user=user)


def active_jobs(*, team: Team, cluster: Cluster | None = None) -> QuerySet[GpuJob]:
    """The team's jobs that hold (or may soon hold) GPUs: not finished yet."""
    jobs = GpuJob.objects.filter(team=team, state__in=ACTIVE_STATES)
    if cluster is not None:
        jobs = jobs.filter(cluster=cluster)
    return jobs


@dataclass(frozen=True)
class QuotaLeft:
    """A team's GPUs of one kind on one cluster: granted (grants in effect today), held by its
    unfinished jobs, and what is left for new jobs."""

    granted: int
    held: int

    @property
    def left(self) -> int:
        return max(self.granted - self.held, 0)


def quota_left(*, team: Team, cluster: Cluster, gpu_resource: str) -> QuotaLeft:
    today = timezone.localdate()
    granted = (
        QuotaGrant.objects.filter(
            Q(ends_on__isnull=True) | Q(ends_on__gte=today),
            team=team,
            cluster=cluster,
            gpu_resource=gpu_resource,
            state=QuotaGrant.State.ACTIVE,
            starts_on__lte=today,
        ).aggregate(total=Sum("gpus"))["total"]
        or 0
    )
    held = (
        active_jobs(team=team, cluster=cluster)
        .filter(gpu_resource=gpu_resource)
        .aggregate(total=Sum("gpus"))["total"]
        or 0
    )
    return QuotaLeft(granted=granted, held=held)


def team_page_jobs(user: User | AnonymousUser, *, team: Team, finished: int) -> list[GpuJob]:
    """The team's unfinished jobs and its ``finished`` most recent finished ones, newest first,
    in one query."""
    recent = (
        GpuJob.objects.filter(team=team)
        .exclude(state__in=ACTIVE_STATES)
        .order_by("-created_at", "-id")
        .values("pk")[:finished]
    )
    return list(
        jobs_visible_to(user)
        .filter(team=team)
        .filter(Q(state__in=ACTIVE_STATES) | Q(pk__in=recent))
        .order_by("-created_at", "-id")
    )


def gpus_in_use(jobs: list[GpuJob]) -> list[dict]:
    """Per cluster and GPU kind: GPUs held by running jobs, and asked for by waiting ones."""
    rows: dict[tuple[str, str], dict] = {}
    for job in jobs:
        if job.state not in ACTIVE_STATES:
            continue
        key = (job.cluster.name, job.gpu_resource)
        entry = rows.setdefault(
            key, {"cluster": key[0], "gpu_resource": key[1], "running": 0, "waiting": 0}
        )
        entry["running" if job.state == "running" else "waiting"] += job.gpus
    return [rows[key] for key in sorted(rows)]


def gpu_models(cluster: Cluster) -> list[str]:
    """GPU models the cluster's nodes have (from its inventory), for choosing one."""
    models: set[str] = set()
    for value in GpuCapacity.objects.filter(cluster=cluster).values_list("gpu_model", flat=True):
        models.update(m.strip() for m in (value or "").split(",") if m.strip())
    return sorted(models)


def gpu_resources(cluster: Cluster) -> list[str]:
    """GPU kinds the cluster offers; ``nvidia.com/gpu`` when its inventory lists none yet."""
    names = list(
        GpuCapacity.objects.filter(cluster=cluster)
        .order_by("resource_name")
        .values_list("resource_name", flat=True)
    )
    return names or ["nvidia.com/gpu"]
