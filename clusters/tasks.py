"""Celery tasks for clusters: keep the portal's GPU capacity true to the nodes."""

from celery import shared_task
from django.conf import settings

from clusters.capacity import capacity_sync
from clusters.kube import ClusterNotConfigured, TransientKubeError, connection_configured
from clusters.models import Cluster


@shared_task(
    acks_late=True,
    autoretry_for=(TransientKubeError,),
    retry_backoff=True,
    retry_backoff_max=settings.PORTAL_RECONCILE_RETRY_BACKOFF_MAX,
    max_retries=3,
)
def sync_cluster_inventory(*, cluster_id: int) -> dict[str, int]:
    """Read the cluster's GPU nodes and update its capacity rows; returns the new figures of
    the GPU kinds that changed."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return {}
    try:
        changes = capacity_sync(cluster=cluster)
    except ClusterNotConfigured:
        return {}  # nothing to read: capacity stays what an admin entered
    return {c.resource_name: c.after for c in changes if not c.gpu_model}


@shared_task(acks_late=True)
def sync_all_inventories() -> list[int]:
    """The periodic inventory sync: one task per cluster the portal can reach."""
    ids = [c.pk for c in Cluster.objects.all() if connection_configured(c)]
    for cluster_id in ids:
        sync_cluster_inventory.delay(cluster_id=cluster_id)
    return ids
