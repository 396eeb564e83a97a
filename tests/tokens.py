"""API tokens for tests, made in one place: when the portal's token scheme changes, this module
is the one to change."""

from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

SCHEME = "Token"


def api_token(user: User) -> str:
    """A token for ``user``, as the portal's token endpoint would issue it."""
    return Token.objects.get_or_create(user=user)[0].key


def auth_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"{SCHEME} {token}"}
