"""Which of a team's Kueue LocalQueues a workload waits in on a cluster, for every kind of
workload: the one named after its kind of work (``guaranteed`` or ``opportunistic``) when Kueue
enforces the cluster's quota, none under the ResourceQuota alone."""

from __future__ import annotations

from clusters.models import Cluster, QuotaMode


def kueue_mode(cluster: Cluster) -> bool:
    """Whether Kueue enforces the cluster's quota (workloads wait in queues) rather than the
    ResourceQuota alone."""
    return cluster.quota_mode == QuotaMode.KUEUE


def queue_for(cluster: Cluster, priority: str) -> str:
    """The team's LocalQueue a workload of that kind of work is created in on the cluster now."""
    return priority if kueue_mode(cluster) else ""
