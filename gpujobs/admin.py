from django.contrib import admin

from gpujobs.models import GpuJob


@admin.register(GpuJob)
class GpuJobAdmin(admin.ModelAdmin):
    """For looking, not changing: jobs change through the portal's services (submit, stop)."""

    list_display = [
        "id",
        "name",
        "team",
        "cluster",
        "gpus",
        "priority",
        "state",
        "node",
        "exit_code",
        "submitted_by",
        "created_at",
    ]
    list_filter = ["state", "priority", "cluster", "team"]
    search_fields = ["name", "image", "node", "submitted_by__username"]
    readonly_fields = [field.name for field in GpuJob._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
