from django.contrib import admin
from django.db import models

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity


class GpuCapacityInline(admin.TabularInline):
    model = GpuCapacity
    extra = 0


class GpuModelCapacityInline(admin.TabularInline):
    """Read-only: the capacity sync writes these from the nodes."""

    model = GpuModelCapacity
    extra = 0
    readonly_fields = ["resource_name", "gpu_model", "allocatable", "nodes", "max_per_node"]
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "overcommit_ratio", "quota_mode", "prometheus_url"]
    # Switched on the portal's quota mode page (or the API), which audits the switch and moves
    # every team on the cluster; a plain field edit here would do neither.
    readonly_fields = ["quota_mode", "gateway_api"]
    inlines = [GpuCapacityInline, GpuModelCapacityInline]
    # API servers and Prometheus are reached over https unless a URL says otherwise.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
