"""What happened to a team, told to whoever listens: the events that webhooks (and any later
channel) carry out of the portal.

The places where things happen (a request decided in ``tenants.quota``, a grant's reminder in
``monitoring.grant_reminders``, an idle pod found in ``monitoring.idle``, a job ending in
``gpujobs.recording``, a budget threshold in ``billing.budget_checks``) call ``emit`` inside the
transaction that records the change. Apps that carry events out (``webhooks``) connect to
``event_emitted`` in their ``AppConfig.ready``, so ``tenants`` and the apps below it never import
them, and what a receiver records (a delivery to send) commits or rolls back with the change.
Receivers only record and enqueue after commit; they never talk to the network.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import models
from django.dispatch import Signal
from django.utils import timezone

logger = logging.getLogger(__name__)


class EventKind(models.TextChoices):
    """Every kind of event a team can be told of. Webhooks subscribe to these by value."""

    QUOTA_REQUEST_DECIDED = "quota_request.decided", "Quota request approved or rejected"
    GRANT_ENDING = "quota_grant.ending", "Grant ends soon"
    GPUS_IDLE = "gpus.idle", "GPUs idle"
    JOB_SUCCEEDED = "gpu_job.succeeded", "GPU job succeeded"
    JOB_FAILED = "gpu_job.failed", "GPU job failed"
    JOB_PREEMPTED = "gpu_job.preempted", "GPU job preempted (its pods are stopped, it is requeued)"
    SESSION_IDLE = "session.idle", "Session idle, to be stopped"
    SESSION_STOPPED = "session.stopped", "Session stopped"
    SHARING_LAYOUT_CHANGED = (
        "sharing_layout.changed",
        "Sharing layout decided, applied, failed or reverted",
    )
    BUDGET_WARNING = "budget.warning", "Budget 80% spent"
    BUDGET_EXHAUSTED = "budget.exhausted", "Budget spent"


@dataclass(frozen=True)
class Event:
    """One thing that happened to one team: its kind, a line in words, JSON-safe facts
    (``data``) and where in the portal to look (``link``, a path)."""

    kind: str
    team_id: int
    title: str
    data: dict[str, Any] = field(default_factory=dict)
    link: str = ""
    occurred_at: datetime.datetime = field(default_factory=timezone.now)


# Sent as ``event_emitted.send(sender=Event, event=...)`` inside the change's transaction.
event_emitted = Signal()


def emit(
    *, team_id: int, kind: EventKind | str, title: str, data: dict | None = None, link: str = ""
) -> Event:
    """Tell the receivers that ``kind`` happened to the team. Call inside the transaction of
    the change. A receiver that fails is logged and does not undo the change: receivers keep
    their writes in a savepoint of their own."""
    event = Event(kind=str(kind), team_id=team_id, title=title, data=dict(data or {}), link=link)
    for receiver, result in event_emitted.send_robust(sender=Event, event=event):
        if isinstance(result, Exception):
            logger.error(
                "event %s of team %s: receiver %r failed: %s", kind, team_id, receiver, result
            )
    return event
