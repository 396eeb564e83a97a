"""The minimum run time of borrowers (``Cluster.borrower_min_runtime_seconds``): opportunistic
Jobs start at the protected borrowers' priority, as high as guaranteed work's, and on such a
cluster every queue preempts only lower priorities (``reconcile.queue_manifests``); nobody can
preempt them. This module ends the protection, by lowering a Job's priority class label to
opportunistic work's (Kueue then lowers its Workload's priority and looks again at the
workloads waiting for GPUs):

* once the Job has run the minimum run time since Kueue last admitted it (its ``startTime``,
  which Kubernetes sets again each time a suspended Job resumes);
* for every protected Job of the cluster at once, when a lender's guaranteed job has waited
  longer than the cluster's bound (``Cluster.lender_wait_bound_seconds``) behind them: Kueue
  then preempts as few of them as the lender needs;
* at once where the cluster has no minimum run time (any more), and for Jobs made around the
  portal with the protected label.

The Jobs are found on the cluster by their label, so kubectl's Jobs are covered too (the jobs
admission policy lets nobody raise a Job's priority to protected after its creation). A Job
lowered once stays lowered, also when it is preempted and admitted again.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import (
    GUARANTEED,
    KUEUE_PRIORITY_CLASS_LABEL,
    OPPORTUNISTIC,
    PROTECTED_BORROWER,
    priority_class_name,
)
from clusters.workloads import WorkloadClient
from gpujobs.models import GpuJob
from workloads.pod_states import parse_time

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProtectedJob:
    namespace: str
    name: str
    running_since: datetime.datetime | None  # None: suspended, waiting in its queue


def protected_jobs(items: list[dict]) -> list[ProtectedJob]:
    """The protected Jobs of a listing, and since when each runs (pure)."""
    found = []
    for item in items:
        metadata, spec = item.get("metadata") or {}, item.get("spec") or {}
        started = (item.get("status") or {}).get("startTime")
        running = not spec.get("suspend") and started
        found.append(
            ProtectedJob(
                namespace=metadata.get("namespace", ""),
                name=metadata.get("name", ""),
                running_since=parse_time(started) if running else None,
            )
        )
    return found


def to_lower(
    jobs: list[ProtectedJob],
    *,
    min_runtime: datetime.timedelta,
    lender_waited_too_long: bool,
    now: datetime.datetime,
) -> list[ProtectedJob]:
    """Which running protected Jobs lose their protection now (pure): those that have run the
    minimum run time, or all of them when a lender has waited too long or there is none."""
    running = [job for job in jobs if job.running_since is not None]
    if lender_waited_too_long or not min_runtime:
        return running
    return [job for job in running if now - job.running_since >= min_runtime]


def lender_waited_too_long(cluster: Cluster, *, now: datetime.datetime) -> bool:
    """Whether a guaranteed job of the cluster has waited in its queue past the bound."""
    since = now - datetime.timedelta(seconds=cluster.lender_wait_bound_seconds)
    return GpuJob.objects.filter(
        cluster=cluster,
        queue_name=GUARANTEED,
        state=GpuJob.State.PENDING,
        submitted_at__lte=since,
    ).exists()


def end_protection(cluster: Cluster, *, kube: WorkloadClient | None = None) -> list[str]:
    """Lower the priority of the cluster's protected Jobs whose protection is over; returns
    them as ``namespace/name``."""
    if cluster.quota_mode != QuotaMode.KUEUE:
        return []
    kube = kube or WorkloadClient.for_cluster(cluster)
    protected = priority_class_name(settings.PORTAL_NAME, PROTECTED_BORROWER)
    listing = kube.list_objects("Job", label_selector=f"{KUEUE_PRIORITY_CLASS_LABEL}={protected}")
    jobs = protected_jobs(listing.items)
    if not jobs:
        return []
    now = timezone.now()
    waited = (
        cluster.borrower_min_runtime_seconds > 0
        and any(job.running_since for job in jobs)
        and lender_waited_too_long(cluster, now=now)
    )
    lowered = []
    for job in to_lower(
        jobs,
        min_runtime=datetime.timedelta(seconds=cluster.borrower_min_runtime_seconds),
        lender_waited_too_long=waited,
        now=now,
    ):
        if kube.relabel_job(
            job.namespace,
            job.name,
            key=KUEUE_PRIORITY_CLASS_LABEL,
            old=protected,
            new=priority_class_name(settings.PORTAL_NAME, OPPORTUNISTIC),
        ):
            lowered.append(f"{job.namespace}/{job.name}")
    if lowered:
        logger.info("Borrowers of %s no longer protected: %s", cluster.name, ", ".join(lowered))
    return lowered
