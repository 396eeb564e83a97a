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

Loopback names (``localhost``, ``127.0.0.0/8``, ``::1``) count as one host.

Nor may a webhook reach the portal's own network: an address that is not public (loopback,
private, link-local, multicast, unique-local, unspecified, reserved) is refused in every spelling
(``127.1``, ``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``[::ffff:127.0.0.1]``), and so is a name
that resolves to one when the webhook is saved; ``sending`` checks the resolved address again at
each delivery (DNS can change) and connects to the address it checked. An admin allows named
internal hosts, addresses or networks (``WEBHOOKS_ALLOWED_INTERNAL_HOSTS``).
"""

from __future__ import annotations

import ipaddress
import socket
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


IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# What a host of legacy IPv4 spelling is made of (inet_aton reads 127.1, 0x7f.1, 017700000001).
_LEGACY_IPV4 = set("0123456789abcdefx.")


def ip_of(host: str) -> IpAddress | None:
    """The address a host names literally, in any spelling a resolver accepts (an IPv4-mapped
    IPv6 address as its IPv4 address), or None for a name."""
    host = host.strip().lower().strip("[]").rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if not host or not set(host) <= _LEGACY_IPV4 or not any(c.isdigit() for c in host):
            return None
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_internal(address: IpAddress) -> bool:
    """Whether the address is the portal's own network rather than the public internet."""
    return not address.is_global or address.is_multicast


def internal_allowed(host: str, address: IpAddress) -> bool:
    """Whether an admin allowed this host (by name) or address (by address or network)."""
    name = host.strip().lower().strip("[]").rstrip(".")
    for entry in settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS:
        entry = entry.strip().lower()
        if entry == name:
            return True
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def resolve(host: str, port: int) -> list[IpAddress]:
    """Every address the host stands for: itself when it is one, else what DNS says (empty when
    it says nothing)."""
    literal = ip_of(host)
    if literal is not None:
        return [literal]
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    addresses = []
    for *_, sockaddr in found:
        address = ip_of(str(sockaddr[0]).split("%")[0])
        if address is not None and address not in addresses:
            addresses.append(address)
    return addresses


def internal_refusal(host: str, addresses: list[IpAddress]) -> str | None:
    """Why a host of these addresses is not to be posted to, or None."""
    for address in addresses:
        if is_internal(address) and not internal_allowed(host, address):
            return (
                f"Points at an internal address ({address}): webhooks go to services on the "
                "internet, or to internal hosts a portal admin allowed "
                "(WEBHOOKS_ALLOWED_INTERNAL_HOSTS)."
            )
    return None


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
    return internal_refusal(host, resolve(host, port or DEFAULT_PORTS[scheme]))


def check_webhook_url(
    url: object, *, request_host: str | None = None, request_scheme: str = "http"
) -> str:
    """The URL, stripped, or a ValidationError on ``url`` saying what is wrong with it."""
    refusal = url_refusal(url, request_host=request_host, request_scheme=request_scheme)
    if refusal:
        raise ValidationError({"url": refusal})
    return url.strip()  # type: ignore[union-attr]
