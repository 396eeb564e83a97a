from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Signing in: API tokens (stored hashed, expiring, revocable), sign-in lockouts, and single
    sign-on through an OpenID provider with group sync."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"

    def ready(self) -> None:
        from accounts import checks  # noqa: F401  (registers the system checks)
        from accounts.receivers import on_user_lost_access
        from tenants.signals import user_lost_access

        user_lost_access.connect(on_user_lost_access, dispatch_uid="accounts-revoke-tokens")
