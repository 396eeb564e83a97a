"""How a change asks for a service's objects to be brought in line with its rows: the one way
anything enqueues ``tasks.reconcile_service``.

Inside a change, ``request_after_commit`` marks the service as behind in the same transaction
and enqueues the task once the change is committed; outside one (the periodic sweep, the
watcher finishing a rollout), ``enqueue_now`` sends it at once. A broker that is down never
fails a change: the mark stays, and the sweep catches up.
"""

import logging

from celery import current_app
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from serving.models import InferenceService

logger = logging.getLogger(__name__)


def request_after_commit(*, service_id: int) -> None:
    InferenceService.objects.filter(pk=service_id).update(
        reconcile_requested_at=timezone.now(), status=InferenceService.Status.PENDING
    )
    transaction.on_commit(lambda: enqueue_now(service_id=service_id))


def enqueue_now(*, service_id: int) -> None:
    try:
        current_app.tasks["serving.tasks.reconcile_service"].delay(service_id=service_id)
    except OperationalError:
        logger.exception("Could not enqueue the reconcile of service %s", service_id)


def enqueue_rollout_finish(*, service_id: int) -> None:
    try:
        current_app.tasks["serving.tasks.finish_rollout"].delay(service_id=service_id)
    except OperationalError:
        logger.exception("Could not enqueue finishing the rollout of service %s", service_id)
