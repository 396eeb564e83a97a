from django.contrib import admin

from monitoring.models import IdlePod, IdlePolicy, Notification


@admin.register(IdlePolicy)
class IdlePolicyAdmin(admin.ModelAdmin):
    list_display = ["team", "notify_leads", "stop_after_minutes", "warn_minutes_before_stop"]
    search_fields = ["team__slug", "team__name"]


@admin.register(IdlePod)
class IdlePodAdmin(admin.ModelAdmin):
    list_display = [
        "namespace", "pod", "cluster", "gpus", "average_utilisation", "first_idle_at",
        "notified_at", "warned_at", "stopped_at", "ended_at",
    ]  # fmt: skip
    list_filter = ["cluster", "ended_at"]
    search_fields = ["namespace", "pod"]


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["user", "kind", "subject", "created_at", "read_at", "emailed_at"]
    list_filter = ["kind"]
    search_fields = ["user__username", "subject"]
