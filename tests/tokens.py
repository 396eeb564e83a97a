"""API tokens for tests, made in one place: when the portal's token scheme changes, this module
is the one to change."""

import datetime

from django.contrib.auth.models import User

from accounts.models import ApiToken

SCHEME = "Token"


def api_token(user: User) -> str:
    """A new token for ``user``, hashed and expiring as the portal's token endpoint issues them
    (made without the per-user limit on active tokens, which tests are not about)."""
    _, secret = ApiToken.objects.create(user=user, expiry=datetime.timedelta(days=1))
    return secret


def auth_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"{SCHEME} {token}"}
