"""Celery tasks for sessions: small, given ids, safe to run twice. The work is in
``cluster_sessions``, ``tracker`` and ``culling``; ``enqueue`` sends the first two."""

import datetime
import logging

from celery import shared_task
from django.conf import settings
from django.db import OperationalError
from django.utils import timezone

from clusters.kube import KubeError, TransientKubeError, connection_configured
from clusters.models import Cluster
from interactive import cluster_sessions, culling, enqueue, tracker
from interactive.models import InteractiveSession

logger = logging.getLogger(__name__)
State = InteractiveSession.State

RETRY = {
    "acks_late": True,
    "autoretry_for": (TransientKubeError, OperationalError),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 8,
}


@shared_task(**RETRY)
def start_session(*, session_id: int) -> str:
    """Make the session's current run on its cluster (once)."""
    return cluster_sessions.session_create_on_cluster(session_id=session_id)


@shared_task(**RETRY)
def delete_session_run(*, session_id: int, run: int) -> bool:
    """Delete a stopped run's Job and pod (the home volume stays)."""
    return cluster_sessions.session_run_delete(session_id=session_id, run=run)


@shared_task(acks_late=True)
def resync_sessions() -> dict:
    """The periodic safety net: start queued sessions nobody started (a lost message), and
    bring every active session in line with its cluster from full lists."""
    stuck = timezone.now() - datetime.timedelta(seconds=settings.GPUJOBS_REQUEUE_AFTER_SECONDS)
    requeued = 0
    for session_id in InteractiveSession.objects.filter(
        state=State.QUEUED, state_changed_at__lt=stuck
    ).values_list("pk", flat=True):
        requeued += enqueue.enqueue_start(session_id=session_id)
    clusters = {}
    for cluster in Cluster.objects.filter(
        sessions__state__in=[State.STARTING, State.RUNNING]
    ).distinct():
        if not connection_configured(cluster):
            continue
        try:
            clusters[cluster.name] = tracker.resync_cluster(cluster)
        except KubeError as error:
            logger.warning("session resync of cluster %s failed: %s", cluster.name, error)
            clusters[cluster.name] = {"error": str(error)}
    return {"requeued": requeued, "clusters": clusters}


@shared_task(acks_late=True)
def cull_sessions() -> dict:
    """Warn idle sessions' owners, and stop those idle past their team's limit."""
    return culling.check_all()
