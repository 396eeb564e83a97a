from django.contrib import admin

from accounts.models import ApiToken, OidcIdentity


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


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):
    """Who signed in through single sign-on, when last, and the groups they had then. Read-only:
    the provider decides; deleting one unlinks the account for good (the next sign-in of that
    subject is refused until the account is renamed or deleted: single sign-on never links an
    account by its username)."""

    list_display = ["user", "subject", "last_sign_in_at"]
    search_fields = ["user__username", "subject"]
    fields = ["user", "subject", "last_sign_in_at", "groups"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
