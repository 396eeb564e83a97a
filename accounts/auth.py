"""API token authentication: knox's (the token is looked up by its first characters and
checked against the stored hash; expired tokens are deleted as they are met), noting when each
token was last used, and described in the OpenAPI schema as knox's bearer scheme."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from accounts import services


class ApiTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, token: bytes):
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            # knox would let this escape as a 500.
            raise AuthenticationFailed(_("Invalid token.")) from None
        user, api_token = super().authenticate_credentials(token)
        services.api_token_mark_used(token=api_token)
        return user, api_token


class ApiTokenScheme(KnoxTokenScheme):
    target_class = "accounts.auth.ApiTokenAuthentication"
