"""Sending the GPU job tasks: creating a batch's Jobs in shares side by side, deleting a
cancelled job's Job, making a waiting Job again under its cluster's new mode, and enqueueing
again the queued jobs nobody is creating. The services, the tracker and the tasks themselves
send them from here; tasks are named, not imported, so that nothing here imports the tasks
module (which imports what does the work).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Sequence

from celery import current_app
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import OperationalError

from gpujobs.models import GpuJob
from workloads.pod_states import Reason

logger = logging.getLogger(__name__)
State = GpuJob.State


def _send(name: str, **kwargs) -> bool:
    """Send the task of that name (as Celery registered it); if the broker is unreachable, log
    it (the periodic resync catches up) and say so."""
    try:
        current_app.tasks[name].delay(**kwargs)
    except OperationalError:
        logger.exception("Could not enqueue %s(%s); the resync will", name, kwargs)
        return False
    return True


# A batch's jobs are created by at most this many tasks side by side (a worker's threads, or
# several workers'), each creating its share one job after another: one message per share rather
# than per job.
SUBMIT_SHARES = 16


def submit_shares(job_ids: Sequence[int], *, at_most: int = SUBMIT_SHARES) -> list[list[int]]:
    """``job_ids`` in order, cut into at most ``at_most`` shares of nearly equal length."""
    count = min(len(job_ids), at_most)
    if count == 0:
        return []
    size, longer = divmod(len(job_ids), count)
    shares, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < longer else 0)
        shares.append(list(job_ids[start:end]))
        start = end
    return shares


def enqueue_submits(*, job_ids: Sequence[int]) -> None:
    """Send the tasks that create the jobs' Jobs: each job alone (``submit_job``), or a batch
    in shares (``submit_jobs``). If the broker is unreachable, that is logged once: the
    periodic resync enqueues the rest."""
    for share in submit_shares(job_ids):
        sent = (
            _send("gpujobs.tasks.submit_job", job_id=share[0])
            if len(share) == 1
            else _send("gpujobs.tasks.submit_jobs", job_ids=share)
        )
        if not sent:
            return  # the broker is away: the rest would fail alike


def enqueue_delete(*, job_id: int) -> None:
    _send("gpujobs.tasks.delete_job", job_id=job_id)


def enqueue_requeue(*, job_id: int) -> None:
    _send("gpujobs.tasks.requeue_job_for_mode", job_id=job_id)


def enqueue_release(*, team_id: int, cluster_id: int, user_id: int) -> None:
    """Send a member's jobs that wait for their own limit, as far as it allows now."""
    _send(
        "gpujobs.tasks.release_held_jobs", team_id=team_id, cluster_id=cluster_id, user_id=user_id
    )


def requeue_stuck_jobs(*, older_than_seconds: int | None = None) -> list[int]:
    """Enqueue again the queued jobs no worker is creating: their message was lost (a broker
    outage) or the worker that claimed them died. The claim makes a duplicate harmless."""
    now = timezone.now()
    age = older_than_seconds
    if age is None:
        age = settings.GPUJOBS_REQUEUE_AFTER_SECONDS
    lease = now - datetime.timedelta(seconds=settings.GPUJOBS_CLAIM_SECONDS)
    ids = list(
        GpuJob.objects.filter(
            Q(claimed_at__isnull=True) | Q(claimed_at__lt=lease),
            state=State.QUEUED,
            created_at__lte=now - datetime.timedelta(seconds=age),
        )
        .exclude(reason=Reason.MEMBER_LIMIT)  # waiting for its member's limit: not to be created
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    enqueue_submits(job_ids=ids)
    return ids
