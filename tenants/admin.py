from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from tenants import object_limits, services
from tenants.audit import snapshot
from tenants.identities import identity_refusal
from tenants.models import (
    AuditEvent,
    ClusterState,
    Membership,
    QuotaGrant,
    QuotaRequest,
    Team,
    TeamCluster,
    TeamObjectLimits,
    TeamQueuePolicy,
)


def _cluster_identity(username: str) -> str:
    refusal = identity_refusal(username)
    if refusal:
        raise ValidationError(f"{refusal} It could not be given access to a cluster.")
    return username


class MembershipInlineForm(forms.ModelForm):
    def clean_user(self):
        user = self.cleaned_data["user"]
        _cluster_identity(user.get_username())
        return user


class MembershipInline(admin.TabularInline):
    """Saved through the services (``TeamAdmin.save_formset``): checked, audited, and on the
    clusters at once."""

    model = Membership
    form = MembershipInlineForm
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    """Teams change through the services, as on the portal's pages: created and updated with an
    audit event, the slug fixed once the team has a namespace, archived by the archive action
    (which revokes grants and access), memberships set and removed with their RoleBindings."""

    list_display = ["slug", "name", "archived_at", "external_services_allowed"]
    inlines = [MembershipInline]
    actions = ["archive"]

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and TeamCluster.objects.filter(team=obj).exists():
            return ["slug", "archived_at"]
        return ["archived_at"]

    def save_model(self, request, obj, form, change):
        if change:
            fields = [
                f
                for f in ("slug", "name", "description", "external_services_allowed")
                if f in form.changed_data
            ]
            services.team_update(
                actor=request.user, team=obj, **{f: form.cleaned_data[f] for f in fields}
            )
            return
        team = services.team_create(
            actor=request.user, slug=obj.slug, name=obj.name, description=obj.description
        )
        obj.pk, obj.created_at = team.pk, team.created_at

    def save_formset(self, request, form, formset, change):
        if formset.model is not Membership:
            super().save_formset(request, form, formset, change)
            return
        team, actor = form.instance, request.user
        changed = formset.save(commit=False)
        for membership in formset.deleted_objects:
            services.membership_remove(actor=actor, team=team, user=membership.user)
        for membership in changed:
            if membership.pk is not None:
                previous = Membership.objects.get(pk=membership.pk)
                if previous.user_id != membership.user_id:
                    services.membership_remove(actor=actor, team=team, user=previous.user)
            services.membership_set(
                actor=actor, team=team, user=membership.user, role=membership.role
            )

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


@admin.register(TeamObjectLimits)
class TeamObjectLimitsAdmin(admin.ModelAdmin):
    """A team's own caps on a cluster (Jobs, pods, Services, ConfigMaps, Secrets, claims,
    storage), through the service, which audits them and brings the team's quota in line."""

    list_display = ["team", "cluster", "limits", "updated_by", "updated_at"]
    list_filter = ["cluster"]
    fields = ["team", "cluster", "limits"]

    def get_readonly_fields(self, request, obj=None):
        return ["team", "cluster"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        saved = object_limits.team_object_limits_set(
            actor=request.user, team=obj.team, cluster=obj.cluster, limits=obj.limits
        )
        if saved is not None:
            obj.pk = saved.pk

    def delete_model(self, request, obj):
        object_limits.team_object_limits_set(
            actor=request.user, team=obj.team, cluster=obj.cluster, limits={}
        )

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


admin.site.register(TeamCluster)
admin.site.register(ClusterState)


class PortalUserCreationForm(AdminUserCreationForm):
    def clean_username(self):
        username = super().clean_username()
        return _cluster_identity(username) if username else username


class PortalUserChangeForm(UserChangeForm):
    def clean_username(self):
        return _cluster_identity(self.cleaned_data["username"])


admin.site.unregister(User)


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    """Django's user admin, with usernames that can name a user on a cluster, and access on
    the clusters following a deactivation, a rename or a deletion at once."""

    form = PortalUserChangeForm
    add_form = PortalUserCreationForm

    def save_model(self, request, obj, form, change):
        before = snapshot(User.objects.get(pk=obj.pk)) if change else None
        super().save_model(request, obj, form, change)
        if before is not None:
            services.user_access_changed(actor=request.user, user=obj, before=before)

    def delete_model(self, request, obj):
        services.user_delete(actor=request.user, user=obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for user in queryset.order_by("pk"):
                services.user_delete(actor=request.user, user=user)
