"""Sign-in lockouts, by django-axes, for the sign-in page and the API's token endpoint alike
(both sign in through ``django.contrib.auth.authenticate``, so they share one count).

Two limits, over the failures of the last ``AXES_COOLOFF_TIME``:

- ``AXES_FAILURE_LIMIT`` failures for one username from one address lock that username out at
  that address: guessing one person's password from one place stops, while that person can
  still sign in from elsewhere (a lockout per username alone would let anyone lock anyone out);
- ``PORTAL_LOGIN_ADDRESS_FAILURE_LIMIT`` failures from one address, whatever the usernames, lock
  the address out: trying one password on many accounts stops too.

A locked-out attempt answers 429 with ``Retry-After``. It counts as a failure, so the cool-off
starts again with it and ``Retry-After`` is the whole cool-off.
"""

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_cool_off, get_failure_limit
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

# The order of AXES_LOCKOUT_PARAMETERS, which LoginLockoutHandler reads back.
LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]


class LoginLockoutHandler(AxesDatabaseHandler):
    """axes' database handler (counts shared by every web worker), with a limit per address
    of its own beside the limit per username and address."""

    def get_failures(self, request, credentials=None) -> int:
        per_username, per_address = (
            attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        )
        if per_address >= settings.PORTAL_LOGIN_ADDRESS_FAILURE_LIMIT:
            return max(per_username, get_failure_limit(request, credentials))
        return per_username


def client_address(request: HttpRequest) -> str | None:
    """The client's address: ``REMOTE_ADDR``, or behind ``PORTAL_PROXY_COUNT`` reverse proxies
    the address the outermost of them saw (from the right of ``X-Forwarded-For``, which each
    proxy appends to; anything further left was written by the client and proves nothing)."""
    proxies = settings.PORTAL_PROXY_COUNT
    if proxies:
        forwarded = [
            a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()
        ]
        if len(forwarded) >= proxies:
            return forwarded[-proxies]
    return request.META.get("REMOTE_ADDR")


def retry_after_seconds(request: HttpRequest) -> int:
    return int(get_cool_off(request).total_seconds())


def lockout_response(request: HttpRequest, original_response=None, credentials=None):
    """429 with ``Retry-After``: JSON for the API, the sign-in page with the reason otherwise."""
    seconds = retry_after_seconds(request)
    minutes = max(1, round(seconds / 60))
    message = (
        "Too many failed sign-ins: signing in is locked for this account or address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )
    response: HttpResponse
    if request.path_info.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=429)
    else:
        form = AuthenticationForm(request)
        response = render(
            request, "registration/login.html", {"form": form, "lockout": message}, status=429
        )
    response["Retry-After"] = str(seconds)
    return response
