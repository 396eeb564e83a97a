"""Where a webhook may point: the one check of a webhook's URL, used by the service that
creates and changes webhooks (and so by the API and the page alike).

A URL must be ``http`` or ``https``, name a host, and not be the portal itself: posting the
portal's events to the portal would loop them back into its own pages at best. "The portal
itself" is

* the host and port of ``PORTAL_BASE_URL`` (where its e-mails link to),
* the host and port the request that sets the webhook came to (when there is one),
* any host the portal serves (``ALLOWED_HOSTS``) but a loopback one: a receiver on the same
  machine (a chat bridge, the tests' receiver) is allowed on another port, and the portal on
  loopback is caught by the two rules above.

Loopback names (``localhost``, ``127.0.0.0/8``, ``::1``) count as one host. Names are not
resolved: a DNS name of the portal that is in none of these is not recognised.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http.request import split_domain_port, validate_host

MAX_URL_LENGTH = 2000
SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
LOOPBACK = "loopback"


def _canonical_host(host: str) -> str:
    host = host.strip().lower().rstrip(".").strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return LOOPBACK
    try:
        if ipaddress.ip_address(host).is_loopback:
            return LOOPBACK
    except ValueError:
        pass
    return host


def _host_port(authority: str, *, scheme: str) -> tuple[str, int] | None:
    """(canonical host, port) of a ``host[:port]`` string, the scheme's port when none."""
    host, port = split_domain_port(authority.lower())
    if not host:
        return None
    try:
        number = int(port) if port else DEFAULT_PORTS.get(scheme, 80)
    except ValueError:
        return None
    return _canonical_host(host), number


def _portal_addresses(request_host: str | None, request_scheme: str) -> set[tuple[str, int]]:
    addresses = set()
    base = urlsplit(settings.PORTAL_BASE_URL)
    if base.hostname:
        try:
            port = base.port or DEFAULT_PORTS.get(base.scheme, 80)
        except ValueError:
            port = DEFAULT_PORTS.get(base.scheme, 80)
        addresses.add((_canonical_host(base.hostname), port))
    if request_host:
        found = _host_port(request_host, scheme=request_scheme)
        if found:
            addresses.add(found)
    return addresses


def _served_names() -> list[str]:
    """``ALLOWED_HOSTS`` but "*" and loopback names."""
    return [
        pattern
        for pattern in settings.ALLOWED_HOSTS
        if pattern != "*" and _canonical_host(pattern) != LOOPBACK
    ]


def url_refusal(
    url: object, *, request_host: str | None = None, request_scheme: str = "http"
) -> str | None:
    """Why ``url`` cannot be a webhook's URL, in words, or None when it can."""
    if not isinstance(url, str) or not url.strip():
        return "Enter the http:// or https:// URL to post the events to."
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        return f"Must be at most {MAX_URL_LENGTH} characters."
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        return "Must not contain spaces or control characters."
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "Not a valid URL (its host or port cannot be read)."
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        said = f" (not {parts.scheme}:)" if parts.scheme else ""
        return f"Must start with http:// or https://{said}."
    host = parts.hostname
    if not host:
        return "Must name a host, as in https://hooks.example.com/portal."
    canonical = _canonical_host(host)
    if (canonical, port or DEFAULT_PORTS[scheme]) in _portal_addresses(
        request_host, request_scheme
    ) or (canonical != LOOPBACK and validate_host(canonical, _served_names())):
        return "Points at the portal itself: give the address of the service that receives them."
    return None


def check_webhook_url(
    url: object, *, request_host: str | None = None, request_scheme: str = "http"
) -> str:
    """The URL, stripped, or a ValidationError on ``url`` saying what is wrong with it."""
    refusal = url_refusal(url, request_host=request_host, request_scheme=request_scheme)
    if refusal:
        raise ValidationError({"url": refusal})
    return url.strip()  # type: ignore[union-attr]
