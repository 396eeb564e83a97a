"""Reads: which jobs a user may see, what a team's quota has left for new ones, what a cluster
offers (its GPUs per model, on a Kueue cluster), and which jobs the watcher and the periodic
resync follow."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Q, QuerySet, Sum
from django.urls import reverse

from clusters.kube import connection_configured
from clusters.models import Cluster, GpuModelCapacity
from gpujobs.models import GpuJob
from gpujobs.observe import ACTIVE_STATES, Reason
from tenants.impact import Work
from tenants.models import QuotaGrant, Team, TeamCluster
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


def gpus_held_by_jobs(*, team: Team, cluster: Cluster, gpu_resource: str) -> int:
    """The GPUs of a kind the team's unfinished jobs hold (or may soon hold) on the cluster:
    what jobs count against the team's quota (``workloads.holdings``)."""
    held = (
        active_jobs(team=team, cluster=cluster)
        .filter(gpu_resource=gpu_resource)
        .aggregate(total=Sum("gpus"))["total"]
    )
    return held or 0


def member_jobs_use(*, team: Team, cluster: Cluster, user: User) -> tuple[int, int]:
    """The GPUs and the number of a member's unfinished jobs on the cluster, less those waiting
    for the member's own limit (``workloads.member_limits``)."""
    use = (
        active_jobs(team=team, cluster=cluster)
        .filter(submitted_by=user)
        .exclude(reason=Reason.MEMBER_LIMIT)
        .aggregate(gpus=Sum("gpus"), jobs=Count("pk"))
    )
    return use["gpus"] or 0, use["jobs"]


def model_capacities(*, cluster: Cluster, gpu_resource: str) -> list[GpuModelCapacity]:
    """The cluster's GPUs of a kind per model: how many, and how many one node has at most."""
    return list(
        GpuModelCapacity.objects.filter(cluster=cluster, resource_name=gpu_resource).order_by(
            "gpu_model"
        )
    )


def team_page_jobs(
    user: User | AnonymousUser, *, team: Team, unfinished: int, finished: int
) -> list[GpuJob]:
    """The team's ``unfinished`` newest unfinished jobs and its ``finished`` newest finished
    ones, newest first, in one query: a team page stays the same size however many jobs the
    team has waiting (``gpus_in_use`` counts them all)."""
    visible = jobs_visible_to(user).filter(team=team)
    newest = ("-created_at", "-id")
    shown_unfinished = visible.filter(state__in=ACTIVE_STATES).order_by(*newest).values("pk")
    shown_finished = visible.exclude(state__in=ACTIVE_STATES).order_by(*newest).values("pk")
    return list(
        visible.filter(
            Q(pk__in=shown_unfinished[:unfinished]) | Q(pk__in=shown_finished[:finished])
        ).order_by(*newest)
    )


def gpus_in_use(user: User | AnonymousUser, *, team: Team) -> list[dict]:
    """Per cluster and GPU kind, over every unfinished job of the team the user may see: GPUs
    held by running jobs and asked for by waiting ones, and how many jobs each (one query)."""
    running = Q(state=GpuJob.State.RUNNING)
    rows = (
        jobs_visible_to(user)
        .filter(team=team, state__in=ACTIVE_STATES)
        .values("cluster__name", "gpu_resource")
        .annotate(
            running=Sum("gpus", filter=running, default=0),
            waiting=Sum("gpus", filter=~running, default=0),
            jobs=Count("pk"),
        )
        .order_by("cluster__name", "gpu_resource")
    )
    return [
        {
            "cluster": row["cluster__name"],
            "gpu_resource": row["gpu_resource"],
            "running": row["running"],
            "waiting": row["waiting"],
            "jobs": row["jobs"],
        }
        for row in rows
    ]


def namespace_on_its_way(*, team_id: int, cluster_id: int) -> bool:
    """Whether the reconcile will create the team's namespace on the cluster: the team holds an
    active grant there and its namespace was not deleted on purpose."""
    deleted = TeamCluster.objects.filter(
        team_id=team_id, cluster_id=cluster_id, namespace_deleted_at__isnull=False
    ).exists()
    granted = QuotaGrant.objects.filter(
        team_id=team_id, cluster_id=cluster_id, state=QuotaGrant.State.ACTIVE
    ).exists()
    return granted and not deleted


def clusters_with_active_jobs() -> list[Cluster]:
    """Clusters the portal can reach that have jobs it still follows."""
    ids = (
        GpuJob.objects.filter(state__in=ACTIVE_STATES - {GpuJob.State.QUEUED})
        .values_list("cluster_id", flat=True)
        .distinct()
    )
    return [c for c in Cluster.objects.filter(pk__in=list(ids)) if connection_configured(c)]


def followed_jobs(*, cluster_id: int, submitted_before: datetime.datetime) -> list[tuple[str, int]]:
    """(namespace, id) of the cluster's jobs that should have a Job there: created on the cluster
    before the given time and not finished."""
    return [
        (slug, pk)
        for pk, slug in GpuJob.objects.filter(
            cluster_id=cluster_id,
            state__in=[GpuJob.State.SUBMITTED, GpuJob.State.PENDING, GpuJob.State.RUNNING],
            submitted_at__lt=submitted_before,
        ).values_list("pk", "team__slug")
    ]


def cancelled_job_ids(*, cluster_id: int, keys: Sequence[tuple[str, int]]) -> list[int]:
    """Of the jobs whose Jobs are on the cluster, those the portal has cancelled."""
    wanted = dict((job_id, namespace) for namespace, job_id in keys)
    rows = GpuJob.objects.filter(
        cluster_id=cluster_id, pk__in=list(wanted), state=GpuJob.State.CANCELLED
    ).values_list("pk", "team__slug")
    return [pk for pk, slug in rows if wanted.get(pk) == slug]


def idle_stop_message(*, cluster_id: int, namespace: str, pods: Sequence[str]) -> str | None:
    """Why the portal's idle-GPU policy (``monitoring``) stopped one of these pods, if it did."""
    try:
        from monitoring.models import IdlePod
    except ImportError:  # the jobs app works without monitoring
        return None
    if not pods:
        return None
    episode = (
        IdlePod.objects.filter(
            cluster_id=cluster_id, namespace=namespace, pod__in=list(pods), stopped_at__isnull=False
        )
        .order_by("-stopped_at")
        .first()
    )
    if episode is None:
        return None
    return (
        f"Stopped by the idle-GPU policy: its GPUs averaged "
        f"{episode.average_utilisation:.0f}% utilisation."
    )


def jobs_for_impact(*, team: Team, cluster: Cluster, gpu_resource: str) -> list[Work]:
    """The team's unfinished jobs of a GPU kind on the cluster, as a grant change's impact
    preview counts them (``tenants.impact``): one query."""
    jobs = active_jobs(team=team, cluster=cluster).filter(gpu_resource=gpu_resource)
    return [
        Work(
            kind="job",
            id=job.pk,
            name=job.name,
            gpus=job.gpus,
            gpu_model=job.gpu_model,
            since=job.started_at or job.created_at,
            running=job.state == GpuJob.State.RUNNING,
            url=reverse("gpujob-detail", args=[job.pk]),
            flavor=job.admitted_flavor if job.state == GpuJob.State.RUNNING else "",
        )
        for job in jobs.order_by("pk").only(
            "pk",
            "name",
            "gpus",
            "gpu_model",
            "started_at",
            "created_at",
            "state",
            "admitted_flavor",
        )
    ]
