"""Sending the session tasks by name (nothing here imports ``interactive.tasks``). An unreachable
broker is logged; the periodic ``resync_sessions`` catches up."""

from __future__ import annotations

import logging

from celery import current_app
from kombu.exceptions import OperationalError

logger = logging.getLogger(__name__)


def _send(name: str, **kwargs) -> bool:
    try:
        current_app.tasks[name].delay(**kwargs)
    except OperationalError:
        logger.exception("Could not enqueue %s(%s); the resync will", name, kwargs)
        return False
    return True


def enqueue_start(*, session_id: int) -> bool:
    return _send("interactive.tasks.start_session", session_id=session_id)


def enqueue_delete(*, session_id: int, run: int) -> bool:
    return _send("interactive.tasks.delete_session_run", session_id=session_id, run=run)
