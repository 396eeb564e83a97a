"""Changes to API tokens: make one (the token itself is returned once and never stored), revoke
one, note when one was used."""

import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts.models import ApiToken

# How often a token's "last used" time is written: every request would be a write per call.
LAST_USED_PRECISION = datetime.timedelta(minutes=1)


def api_token_create(
    *,
    user: User,
    name: str = "",
    lifetime: datetime.timedelta | None = None,
    scope: str = ApiToken.Scope.READ_WRITE,
) -> tuple[ApiToken, str]:
    """A new token for ``user`` and its secret, which the caller shows once. ``lifetime``
    defaults to ``PORTAL_API_TOKEN_DAYS`` and may not exceed ``PORTAL_API_TOKEN_MAX_DAYS``;
    ``scope`` is read-write or read-only."""
    if scope not in ApiToken.Scope.values:
        raise ValidationError(
            {"scope": f"Must be one of: {', '.join(ApiToken.Scope.values)}."}, code="invalid"
        )
    longest = datetime.timedelta(days=settings.PORTAL_API_TOKEN_MAX_DAYS)
    if lifetime is None:
        lifetime = datetime.timedelta(days=settings.PORTAL_API_TOKEN_DAYS)
    if not datetime.timedelta(0) < lifetime <= longest:
        raise ValidationError(
            {"expires_in_days": f"A token lasts from 1 to {longest.days} days."}, code="range"
        )
    active = ApiToken.objects.filter(user=user, expiry__gt=timezone.now()).count()
    if active >= settings.PORTAL_API_TOKENS_PER_USER:
        raise ValidationError(
            f"You have {active} active API tokens, the most allowed: revoke one first.",
            code="too_many",
        )
    return ApiToken.objects.create(user=user, expiry=lifetime, name=name, scope=scope)


def api_token_revoke(*, token: ApiToken) -> None:
    """Revoke a token: it stops working at once. The caller has checked it is the user's."""
    token.delete()


def api_tokens_revoke_all(*, user: User) -> int:
    """Revoke every token of the user (they lost access); how many there were."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted


def api_token_mark_used(*, token: ApiToken) -> None:
    """Note that the token was just used, at most once per ``LAST_USED_PRECISION``."""
    now = timezone.now()
    stale = now - LAST_USED_PRECISION
    ApiToken.objects.filter(pk=token.pk).exclude(last_used_at__gt=stale).update(last_used_at=now)
