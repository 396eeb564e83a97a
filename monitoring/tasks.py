"""Celery tasks: small, safe to run twice. The work itself lives in services."""

from dataclasses import asdict

from celery import shared_task

from monitoring import services


@shared_task(acks_late=True)
def check_idle_gpus() -> list[dict]:
    """Run by Celery beat (``check-idle-gpus``): find idle GPUs on every cluster, notify, and
    apply the teams' stop policies."""
    return [asdict(result) for result in services.idle_check()]
