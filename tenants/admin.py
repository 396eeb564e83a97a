from django.contrib import admin, messages

from tenants import services
from tenants.models import (
    AuditEvent,
    ClusterState,
    Membership,
    QuotaGrant,
    QuotaRequest,
    Team,
    TeamCluster,
    TeamQueuePolicy,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "archived_at"]
    inlines = [MembershipInline]
    actions = ["archive"]

    @admin.action(description="Archive: revoke grants, remove access and quota on the clusters")
    def archive(self, request, queryset):
        # Through the service, as the portal's page does: checked, audited, reconciled.
        archived = [
            services.team_archive(actor=request.user, team=team).slug
            for team in queryset.filter(archived_at__isnull=True).order_by("pk")
        ]
        self.message_user(request, f"Archived: {', '.join(archived) or 'none'}.", messages.SUCCESS)


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


@admin.register(TeamQueuePolicy)
class TeamQueuePolicyAdmin(QuotaRequestAdmin):
    """Read-only: set on the team's page (or the API), which checks, audits and reconciles."""

    list_display = ["team", "cluster", "borrowing_limit", "lending_limit", "fair_sharing_weight"]
    list_filter = ["cluster"]


admin.site.register(TeamCluster)
admin.site.register(ClusterState)
