from django.contrib import admin

from serving.models import InferenceService, Revision


class RevisionInline(admin.TabularInline):
    model = Revision
    extra = 0
    fields = [
        "number",
        "role",
        "variant",
        "image",
        "weight",
        "replicas",
        "ready_replicas",
        "gpus",
        "gpu_model",
        "reason",
    ]
    readonly_fields = fields
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(InferenceService)
class InferenceServiceAdmin(admin.ModelAdmin):
    """For looking, not changing: services change through the portal's services (deploy,
    revisions, traffic, scale, stop, delete), which check quota and audit every change."""

    list_display = [
        "id",
        "name",
        "team",
        "cluster",
        "status",
        "state",
        "rollout",
        "routing",
        "created_by",
        "created_at",
    ]
    list_filter = ["state", "rollout", "routing", "cluster", "team"]
    search_fields = ["name", "team__slug", "created_by__username"]
    readonly_fields = [field.name for field in InferenceService._meta.fields]
    inlines = [RevisionInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Revision)
class RevisionAdmin(admin.ModelAdmin):
    list_display = [
        "service",
        "number",
        "role",
        "weight",
        "replicas",
        "ready_replicas",
        "image",
        "gpus",
        "created_at",
    ]
    list_filter = ["role", "service__cluster"]
    search_fields = ["service__name", "image"]
    readonly_fields = [field.name for field in Revision._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
