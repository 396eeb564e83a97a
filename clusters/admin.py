from django import forms
from django.contrib import admin

from clusters.models import Cluster, GpuCapacity
from portal.redaction import MASK, redact, without_credentials


class GpuCapacityInline(admin.TabularInline):
    model = GpuCapacity
    extra = 0


class ClusterAdminForm(forms.ModelForm):
    """The Prometheus URL's password never goes to the browser: the field shows it masked, and
    the masked URL sent back unchanged keeps the stored one."""

    class Meta:
        model = Cluster
        fields = ["prometheus_url"]  # the admin adds the others

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
    list_display = ["name", "display_name", "overcommit_ratio", "prometheus"]
    inlines = [GpuCapacityInline]

    @admin.display(description="Prometheus URL")
    def prometheus(self, cluster: Cluster) -> str:
        return cluster.prometheus_url_shown
