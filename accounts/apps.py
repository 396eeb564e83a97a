from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Signing in: API tokens (stored hashed, expiring, revocable) and sign-in lockouts."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"
