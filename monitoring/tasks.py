"""Celery tasks: small, safe to run twice. The work itself lives in ``idle``."""

from dataclasses import asdict

from celery import shared_task

from monitoring import idle


@shared_task(acks_late=True)
def check_idle_gpus() -> list[dict]:
    """Run by Celery beat (``check-idle-gpus``): find idle GPUs on every cluster, notify, and
    apply the teams' stop policies."""
    return [asdict(result) for result in idle.idle_check()]
