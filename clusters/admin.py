from django.contrib import admin

from clusters.models import Cluster, GpuCapacity


class GpuCapacityInline(admin.TabularInline):
    model = GpuCapacity
    extra = 0


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "overcommit_ratio", "prometheus_url"]
    inlines = [GpuCapacityInline]
