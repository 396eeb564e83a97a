"""Celery tasks: small, idempotent, given ids. The work itself lives in services."""

from celery import shared_task

from tenants import services


@shared_task(acks_late=True)
def reconcile_team(*, team_id: int, cluster_id: int) -> None:
    """Bring the team's namespace on the cluster in line with its grants.

    For now this only records that it ran; applying objects to the cluster comes with the
    reconcile work.
    """
    services.reconcile_record_run(team_id=team_id, cluster_id=cluster_id)


@shared_task(acks_late=True)
def expire_quota_grants() -> list[int]:
    return services.quota_grants_expire()
