"""The GPU kinds and models a cluster offers, from its inventory: what a workload may ask for
and what the forms offer."""

from __future__ import annotations

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from clusters.vocabulary import DEFAULT_GPU_RESOURCE


def gpu_models(cluster: Cluster) -> list[str]:
    """GPU models the cluster's nodes have (from its inventory), for choosing one."""
    models: set[str] = set()
    for value in GpuCapacity.objects.filter(cluster=cluster).values_list("gpu_model", flat=True):
        models.update(m.strip() for m in (value or "").split(",") if m.strip())
    models.update(
        GpuModelCapacity.objects.filter(cluster=cluster).values_list("gpu_model", flat=True)
    )
    return sorted(models)


def gpu_resources(cluster: Cluster) -> list[str]:
    """GPU kinds the cluster offers; the default kind when its inventory lists none yet."""
    names = list(
        GpuCapacity.objects.filter(cluster=cluster)
        .order_by("resource_name")
        .values_list("resource_name", flat=True)
    )
    return names or [DEFAULT_GPU_RESOURCE]
