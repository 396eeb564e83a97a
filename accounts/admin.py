from django.contrib import admin

from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Admins see and delete (revoke) tokens; they cannot make or change one, nor read a
    token back (only its hash is stored)."""

    list_display = ["token_key", "user", "name", "created", "expiry", "last_used_at"]
    search_fields = ["token_key", "user__username", "name"]
    fields = ["token_key", "user", "name", "created", "expiry", "last_used_at"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
