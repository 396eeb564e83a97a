from django.conf import settings
from django.db import models
from knox.models import AbstractAuthToken
from knox.settings import CONSTANTS


class ApiToken(AbstractAuthToken):
    """One API token of a user. Only a hash of the token is stored (it is shown once, when it
    is made); ``token_key`` is its first characters, which identify it in lists. Every token
    expires; revoking it deletes the row, and so does deactivating its user or a group sync that
    leaves them in no team (``accounts.receivers``). A read-only token reads and changes nothing.

    knox's own model keys tokens by their digest; this one has a plain id so that a token can
    be named in a URL (revoke) without showing its digest.
    """

    class Scope(models.TextChoices):
        READ_WRITE = "read-write", "read and write"
        READ_ONLY = "read-only", "read only (GET, HEAD, OPTIONS)"

    id = models.BigAutoField(primary_key=True)
    digest = models.CharField(max_length=CONSTANTS.DIGEST_LENGTH, unique=True)
    expiry = models.DateTimeField()
    name = models.CharField(max_length=100, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(
        max_length=16,
        choices=Scope.choices,
        default=Scope.READ_WRITE,
        help_text="Read-only tokens may only read (GET, HEAD, OPTIONS): for dashboards and "
        "scripts that only look.",
    )

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name = "API token"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope__in=["read-write", "read-only"]),
                name="api_token_scope_known",
            )
        ]

    def __str__(self) -> str:
        return f"{self.token_key}… of {self.user}"


class OidcIdentity(models.Model):
    """A user's account at the OpenID provider: who they are there (``subject``, the ``sub``
    claim, stable where usernames may change), when they last signed in through it, and the
    groups it gave then (which ``tenants.group_sync`` applied). Only users who signed in with
    single sign-on have one; their memberships in the teams the group mapping names follow
    their groups."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    subject = models.CharField(max_length=255, unique=True)
    last_sign_in_at = models.DateTimeField(db_index=True)
    groups = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name = "OpenID identity"
        verbose_name_plural = "OpenID identities"

    def __str__(self) -> str:
        return f"{self.user} ({self.subject})"
