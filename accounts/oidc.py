"""Single sign-on through an OpenID Connect provider: mozilla-django-oidc's authorization-code
flow, with the portal's own answer to "who is this, and what may they do" (``accounts.sso``).

Listed as an authentication backend (and its views answering) only when ``OIDC_ENABLED``. A
sign-in the portal refuses, or one the provider or the network spoils, lands on the sign-in page
with a message saying why, never a 500.
"""

from __future__ import annotations

import logging

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from accounts import sso

logger = logging.getLogger(__name__)

# Set on the request when the backend told the person why their sign-in failed.
REFUSAL_SHOWN = "_sso_refusal_shown"


def _tell(request: HttpRequest, message: str) -> None:
    messages.error(request, message)
    setattr(request, REFUSAL_SHOWN, True)


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend; the user comes from ``sso.sso_sign_in``."""

    def authenticate(self, request, **kwargs):
        try:
            return super().authenticate(request, **kwargs)
        except (
            requests.RequestException,
            SuspiciousOperation,
            jwt.PyJWTError,
            ValueError,
        ) as error:
            # The provider unreachable or answering an error or no JSON, or a token that does
            # not verify (or has expired).
            logger.warning("Single sign-on failed: %s", error)
            _tell(request, f"Sign-in with {settings.OIDC_PROVIDER_NAME} failed; try again.")
            return None

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        try:
            return sso.sso_sign_in(claims=claims)
        except sso.SignInRefused as refusal:
            _tell(self.request, str(refusal))
            return None


class _Enabled:
    def dispatch(self, request, *args, **kwargs):
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not enabled.")
        return super().dispatch(request, *args, **kwargs)


class SignInView(_Enabled, OIDCAuthenticationRequestView):
    """Sends the browser to the provider (``?next=`` is where it comes back to)."""


class CallbackView(_Enabled, OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back with a code."""

    def get(self, request):
        try:
            return super().get(request)
        except SuspiciousOperation as error:
            # A state this session never issued (an old tab, a replayed link).
            logger.warning("Single sign-on callback refused: %s", error)
            return self.login_failure()

    def login_success(self):
        response = super().login_success()
        # A single sign-on lasts as long as its groups are trusted (accounts.sso): then the
        # person signs in again, and their groups are read again.
        self.request.session.set_expiry(settings.OIDC_SIGN_IN_MAX_AGE_HOURS * 3600)
        return response

    @property
    def failure_url(self) -> str:
        return resolve_url(settings.LOGIN_REDIRECT_URL_FAILURE)

    def login_failure(self):
        if not getattr(self.request, REFUSAL_SHOWN, False):
            error = self.request.GET.get("error")
            detail = f" ({error})" if error else ""
            _tell(
                self.request,
                f"Sign-in with {settings.OIDC_PROVIDER_NAME} did not complete{detail}; try again.",
            )
        return super().login_failure()
