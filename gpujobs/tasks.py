"""Celery tasks for GPU jobs: small, given ids, safe to run twice. The work is in
``cluster_jobs``; ``enqueue`` sends these tasks.

Every task is acknowledged late (``CELERY_TASK_ACKS_LATE``): a worker that dies mid-task leaves
the message to be delivered again. ``submit_job`` claims the job before creating its Job and
creating finds an earlier attempt's Job, so a second delivery never creates a second Job; the
periodic ``resync_jobs`` enqueues queued jobs whose message was lost.
"""

import logging

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from clusters.kube import KubeError, TransientKubeError
from clusters.models import Cluster, QuotaMode
from gpujobs import borrower_protection, cluster_jobs, enqueue, member_holds, selectors, tracker

logger = logging.getLogger(__name__)

RETRY = {
    "acks_late": True,
    "autoretry_for": (TransientKubeError, OperationalError),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 8,
}


@shared_task(**RETRY)
def submit_job(*, job_id: int) -> str:
    """Create the job's Job on its cluster (once). Past the retries the resync takes over."""
    return cluster_jobs.job_create_on_cluster(job_id=job_id)


@shared_task(acks_late=True)
def submit_jobs(*, job_ids: list[int]) -> dict[int, str]:
    """Create several jobs' Jobs on their clusters, one after another: a share of a batch
    (``enqueue.enqueue_submits`` splits a batch among the workers' threads). A job that fails
    for a passing reason is handed to its own ``submit_job``, which retries it with backoff; a
    second delivery finds the jobs already created (each is claimed before it is created)."""
    outcomes = {}
    owned_namespaces: set[tuple[int, str]] = set()
    for job_id in job_ids:
        try:
            outcomes[job_id] = cluster_jobs.job_create_on_cluster(
                job_id=job_id, owned_namespaces=owned_namespaces
            )
        except (TransientKubeError, OperationalError) as error:
            outcomes[job_id] = f"handed to submit_job to retry: {error}"
            enqueue.enqueue_submits(job_ids=[job_id])
    return outcomes


@shared_task(**RETRY)
def delete_job(*, job_id: int) -> bool:
    """Delete a cancelled job's Job and pods."""
    return cluster_jobs.job_delete_from_cluster(job_id=job_id)


@shared_task(**RETRY)
def requeue_job_for_mode(*, job_id: int) -> str:
    """Make a waiting job's Job again under its cluster's current quota mode (the watcher and
    the resync ask for it when a cluster's mode changed under a waiting Job)."""
    return cluster_jobs.job_requeue_for_mode(job_id=job_id)


@shared_task(acks_late=True)
def release_held_jobs(*, team_id: int, cluster_id: int, user_id: int) -> list[int]:
    """Send a member's jobs waiting for their own limit, as far as it allows now."""
    return member_holds.release_held_jobs(team_id=team_id, cluster_id=cluster_id, user_id=user_id)


@shared_task(acks_late=True)
def resync_jobs() -> dict:
    """The periodic safety net: enqueue queued jobs nobody is creating, and bring every active
    job in line with its cluster from full lists (covers watch events the watcher missed)."""
    requeued = enqueue.requeue_stuck_jobs()
    released = member_holds.release_every_held_job()
    clusters = {}
    for cluster in selectors.clusters_with_active_jobs():
        try:
            clusters[cluster.name] = tracker.resync_cluster(cluster)
        except KubeError as error:
            logger.warning("GPU job resync of cluster %s failed: %s", cluster.name, error)
            clusters[cluster.name] = {"error": str(error)}
    return {
        "requeued": requeued,
        "released": released,
        "clusters": clusters,
        "every": settings.GPUJOBS_RESYNC_SECONDS,
    }


@shared_task(acks_late=True)
def end_borrower_protection() -> dict[str, list[str] | str]:
    """Lower the priority of protected borrowers whose minimum run time is up, or whose
    lender waited too long, on every Kueue cluster (``borrower_protection``)."""
    lowered: dict[str, list[str] | str] = {}
    for cluster in Cluster.objects.filter(quota_mode=QuotaMode.KUEUE):
        try:
            lowered[cluster.name] = borrower_protection.end_protection(cluster)
        except KubeError as error:
            logger.warning("Borrower protection on cluster %s: %s", cluster.name, error)
            lowered[cluster.name] = str(error)
    return lowered
