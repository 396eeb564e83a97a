from django import forms
from django.contrib import admin
from django.db import models

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from clusters.signals import settings_changed
from core.redaction import MASK, redact, without_credentials


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


class ClusterAdminForm(forms.ModelForm):
    """The Prometheus URL's password never goes to the browser: the field shows it masked, and
    the masked URL sent back unchanged keeps the stored one."""

    class Meta:
        model = Cluster
        # Every field, as the admin's own form has: the admin leaves out its read-only ones.
        fields = "__all__"  # noqa: DJ007

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.prometheus_url:
            self.initial["prometheus_url"] = redact(self.instance.prometheus_url)

    def clean_prometheus_url(self) -> str:
        url = self.cleaned_data["prometheus_url"]
        stored = self.instance.prometheus_url
        if stored and url == redact(stored):
            return stored
        credentials = without_credentials(url)[1]
        if credentials and MASK in credentials:
            raise forms.ValidationError(
                "Type the credentials again: the masked ones stand for the stored URL only."
            )
        return url


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterAdminForm
    list_display = ["name", "display_name", "overcommit_ratio", "quota_mode", "prometheus"]
    # Switched on the portal's quota mode page (or the API), which audits the switch and moves
    # every team on the cluster; a plain field edit here would do neither.
    readonly_fields = ["quota_mode", "gateway_api"]
    inlines = [GpuCapacityInline, GpuModelCapacityInline]
    # API servers and Prometheus are reached over https unless a URL says otherwise.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.display(description="Prometheus URL")
    def prometheus(self, cluster: Cluster) -> str:
        return cluster.prometheus_url_shown

    def save_model(self, request, obj, form, change):
        before = Cluster.objects.get(pk=obj.pk) if change else None
        super().save_model(request, obj, form, change)
        # Its admission policies and team namespaces follow (``tenants`` listens): placement,
        # registries, Pod Security level and user prefix all reach the cluster.
        settings_changed.send(sender=Cluster, cluster=obj, before=before, actor=request.user)
