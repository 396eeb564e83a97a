"""Celery tasks of sharing layouts: small, by id, safe to run twice. Each step either finishes
or sends the task again with a countdown (SHARING_POLL_SECONDS) to read the nodes again, so
no worker sleeps while the GPU Operator works. A transient cluster error is tried again the
same way; the periodic ``check_layouts`` reverts layouts whose period ended and sends again the
steps of layouts that stalled."""

import logging

from celery import shared_task
from django.conf import settings

from clusters.kube import TransientKubeError
from sharing.applying import apply_step
from sharing.reverting import resend_stalled, revert_due, revert_step

logger = logging.getLogger(__name__)


def _again(task, *, layout_id: int, step) -> None:
    try:
        countdown = step(layout_id=layout_id)
    except TransientKubeError as error:
        logger.warning("sharing layout %s: %s (trying again)", layout_id, error)
        countdown = 2 * settings.SHARING_POLL_SECONDS
    if countdown is not None:
        task.apply_async(kwargs={"layout_id": layout_id}, countdown=countdown)


@shared_task(acks_late=True)
def apply_layout(*, layout_id: int) -> None:
    """Apply an approved layout on its cluster, a step at a time."""
    _again(apply_layout, layout_id=layout_id, step=apply_step)


@shared_task(acks_late=True)
def revert_layout(*, layout_id: int) -> None:
    """Revert a layout whose period ended, a step at a time."""
    _again(revert_layout, layout_id=layout_id, step=revert_step)


@shared_task(acks_late=True)
def check_layouts() -> dict[str, list[int]]:
    """The periodic check: revert the layouts whose period ended; resend stalled steps."""
    return {"reverting": revert_due(), "resent": resend_stalled()}
