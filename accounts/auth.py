"""API token authentication: knox's (the token is looked up by its first characters and
checked against the stored hash; expired tokens are deleted as they are met), noting when each
token was last used, refusing anything but reading to a read-only token (whatever the view:
one place, so no view can forget it), and described in the OpenAPI schema as knox's bearer
scheme."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.permissions import SAFE_METHODS

from accounts import services
from accounts.models import ApiToken


class ApiTokenAuthentication(TokenAuthentication):
    def authenticate(self, request):
        found = super().authenticate(request)
        if found is not None:
            _, api_token = found
            if api_token.scope == ApiToken.Scope.READ_ONLY and request.method not in SAFE_METHODS:
                raise PermissionDenied(
                    f"This API token is read-only: it cannot {request.method}. Make a "
                    "read-write token to change anything."
                )
        return found

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
