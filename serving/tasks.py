"""Celery tasks for inference services: small, given ids, safe to run twice. The work is in
``reconcile``, ``services`` and ``tracker``.

A reconcile applies the rows as they are when it runs, never the event that scheduled it, so a
second delivery (``CELERY_TASK_ACKS_LATE``) is harmless; transient cluster errors are retried
with backoff (a deleted service's objects still going, among them), and past the retries the
periodic sweep takes over.
"""

import logging

from celery import shared_task
from django.conf import settings

from clusters.kube import KubeError
from reconcile.tasks import RECONCILE_TASK, run_pass
from serving import reconcile, reconcile_triggers, selectors, services, tracker

logger = logging.getLogger(__name__)


@shared_task(**RECONCILE_TASK)
def reconcile_service(*, service_id: int) -> dict:
    """Bring the service's objects on its cluster in line with its rows (or remove them)."""
    return run_pass(
        lambda: reconcile.reconcile_service(service_id=service_id),
        gone="the service no longer exists",
    )


@shared_task(acks_late=True)
def reconcile_services() -> int:
    """The periodic sweep: a reconcile of every service, so hand edits of the portal's fields
    are repaired and deletions finished. Returns how many passes it enqueued."""
    ids = selectors.services_to_reconcile()
    for service_id in ids:
        reconcile_triggers.enqueue_now(service_id=service_id)
    return len(ids)


@shared_task(acks_late=True)
def finish_rollout(*, service_id: int) -> bool:
    """A rollout's new revision has all its replicas ready: it takes over."""
    return services.rollout_finish(service_id=service_id)


@shared_task(acks_late=True)
def resync_services() -> dict:
    """The periodic safety net beside the watcher: every service's Deployments, ReplicaSets and
    pods from full lists, recorded on its revisions (covers watch events the watcher missed)."""
    clusters = {}
    for cluster in selectors.clusters_with_services():
        try:
            clusters[cluster.name] = tracker.resync_cluster(cluster)
        except KubeError as error:
            logger.warning("service resync of cluster %s failed: %s", cluster.name, error)
            clusters[cluster.name] = {"error": str(error)}
    return {"clusters": clusters, "every": settings.SERVING_RESYNC_SECONDS}
