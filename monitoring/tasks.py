"""Celery tasks: small, safe to run twice. The work itself lives in ``idle`` and
``grant_reminders``."""

import datetime
from dataclasses import asdict

from celery import shared_task

from monitoring import grant_reminders, idle


@shared_task(acks_late=True)
def check_idle_gpus() -> list[dict]:
    """Run by Celery beat (``check-idle-gpus``): find idle GPUs on every cluster, notify, and
    apply the teams' stop policies."""
    return [asdict(result) for result in idle.idle_check()]


@shared_task(acks_late=True)
def remind_grants_ending(*, today: str | None = None) -> list[int]:
    """Run by Celery beat (``remind-grants-ending``): remind the leads of every grant that ends
    soon, once per grant and end date; ``today`` (ISO date) for tests and replays. Returns the
    ids of the grants reminded now."""
    day = datetime.date.fromisoformat(today) if today else None
    return grant_reminders.grant_ending_reminders_send(today=day)
