from django.contrib import admin

from tenants.models import AuditEvent, Membership, QuotaGrant, QuotaRequest, Team, TeamCluster


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "archived_at"]
    inlines = [MembershipInline]


@admin.register(QuotaRequest)
class QuotaRequestAdmin(admin.ModelAdmin):
    """Read-only: decisions go through the portal's review queue so they are checked and audited."""

    list_display = ["id", "team", "cluster", "gpu_resource", "gpus", "state", "created_at"]
    list_filter = ["state", "cluster"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(QuotaGrant)
class QuotaGrantAdmin(QuotaRequestAdmin):
    list_display = ["id", "team", "cluster", "gpu_resource", "gpus", "state", "ends_on"]


@admin.register(AuditEvent)
class AuditEventAdmin(QuotaRequestAdmin):
    list_display = ["created_at", "actor", "action", "target_type", "target_id", "team"]
    list_filter = ["action"]


admin.site.register(TeamCluster)
