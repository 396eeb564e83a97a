"""The portal's own reverse proxy to sessions: ``/sessions/<id>/...``, HTTP and websockets,
reaches session ``<id>``'s notebook server, for its owner only, behind the portal's sign-in.

Others put an extra component in front of notebook servers: JupyterHub routes through
configurable-http-proxy and each server checks the user again with the hub (OAuth, a cookie of
its own); Kubeflow routes through an Istio VirtualService with an authenticating proxy beside it.
Here the proxy and the sign-in are one process: ``SessionProxy`` wraps the portal's ASGI
application, reads the portal's session cookie, loads the user as Django does (the session auth
hash included, so a changed password or a sign-out closes the session's door too), and asks
``interactive.selectors.proxy_target`` on every request and every websocket handshake. One
sign-in, one policy check per request, no component to deploy, and a session stops answering
the moment its owner leaves the team or it is stopped.

The notebook server trusts only the portal: it asks every request for ``token``, which the
portal holds and adds as ``Authorization: token ...``. The token is never in a URL, a page or
the browser, so nobody reaches the server without passing this check. The browser's own
credentials stay here: the portal's cookies (session, CSRF, messages, language) are taken out
of what goes upstream, and a server may not set them.

A server authenticated by token skips its own cross-site checks (Jupyter's XSRF, Origin and
Referer checks): a browser never sends a header token by itself. It does send the portal's
cookie, the credential here, so those checks are made here instead (``cross_site_refusal``): a
websocket or a state-changing request from another origin is refused, and so is any cross-site
request but a top-level navigation (fetch metadata). What this does not give is isolation of the
notebook from the portal: on one origin, a page the notebook server returns runs as its owner in
the portal too (JupyterHub's answer is a domain per user, ``subdomain_host``).

Requests and responses stream both ways (an upload is never held whole; long polls and event
streams pass as the server writes them), and a client that leaves ends its upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from http import HTTPStatus
from importlib import import_module
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import httpx
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.views import redirect_to_login
from django.contrib.messages.storage.cookie import CookieStorage
from django.db import close_old_connections
from django.http.cookie import parse_cookie
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as websocket_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from interactive.selectors import ProxyRefusal, ProxyTarget, proxy_target

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[str, str]]

SESSION_PATH = re.compile(r"^/sessions/(\d+)(/|$)")
# Hop-by-hop headers (RFC 9110 7.6.1) belong to one connection and never pass a proxy; neither
# does any header a Connection header names, nor Proxy-*.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "expect"}
)
# The client's say in what the server sees: replaced here, never passed on.
REPLACED_REQUEST_HEADERS = frozenset(
    {"host", "authorization", "cookie", "origin", "x-forwarded-for", "x-forwarded-host"}
    | {"x-forwarded-proto"}
)
# What the websocket library writes in its handshake with the server.
HANDSHAKE_HEADERS = frozenset(
    {"host", "origin", "user-agent", "sec-websocket-key", "sec-websocket-version"}
    | {"sec-websocket-extensions", "sec-websocket-protocol", "sec-websocket-accept"}
)
REPLACED_RESPONSE_HEADERS = frozenset({"date", "server"})  # the serving process adds its own
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# Close codes a websocket endpoint may send (RFC 6455 7.4): 1005, 1006 and 1015 only report.
SENDABLE_CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, *range(1007, 1015)})
CLOSE_REASON_MAX_BYTES = 123
# The largest message taken from a server: Jupyter's kernel messages carry whole outputs.
WEBSOCKET_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
PAGE_HEADERS = [
    (b"content-type", b"text/html; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
]


def session_path(path: str) -> tuple[int, bool] | None:
    """The session id in ``path``, and whether the path goes on past ``/sessions/<id>/``
    (``False``: the bare ``/sessions/<id>``, redirected to the slash); ``None`` for other paths."""
    found = SESSION_PATH.match(path)
    return None if found is None else (int(found[1]), found[2] == "/")


def decoded_headers(raw: Iterable[tuple[bytes, bytes]]) -> Headers:
    return [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in raw]


def _end_to_end(headers: Headers) -> Headers:
    named = {t.strip().lower() for n, v in headers if n == "connection" for t in v.split(",")}
    return [
        (name, value)
        for name, value in headers
        if name not in HOP_BY_HOP and name not in named and not name.startswith("proxy-")
    ]


def cookies_without(headers: Headers, names: frozenset[str]) -> str | None:
    """The request's Cookie headers as one, without the cookies named ``names``; ``None`` when
    nothing is left."""
    kept = [
        cookie.strip()
        for name, value in headers
        if name == "cookie"
        for cookie in value.split(";")
        if cookie.strip() and cookie.split("=", 1)[0].strip() not in names
    ]
    return "; ".join(kept) or None


def request_scheme(scheme: str, headers: Headers, proxy_ssl_header: tuple[str, str] | None) -> str:
    """``http`` or ``https`` as the browser used it: Django's ``HttpRequest.scheme``, which
    trusts the TLS-terminating proxy's header (``SECURE_PROXY_SSL_HEADER``) where one is set."""
    if proxy_ssl_header is not None:
        meta_name, secure_value = proxy_ssl_header
        wanted = meta_name.removeprefix("HTTP_").replace("_", "-").lower()
        for name, value in headers:
            if name == wanted:
                return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return "https" if scheme in ("https", "wss") else "http"


def upstream_request_headers(
    headers: Headers,
    *,
    upstream: str,
    token: str,
    client: str | None,
    scheme: str,
    host: str,
    portal_cookies: frozenset[str],
) -> Headers:
    """What the notebook server at ``upstream`` (``host:port``) gets for a request that came in
    with ``headers``: the end-to-end headers, less the client's Authorization and the portal's
    cookies, with the server's token, its own Host (and Origin, where one was sent: the portal
    has made the origin check that matters), and where the request came from (X-Forwarded-*)."""
    out = [(n, v) for n, v in _end_to_end(headers) if n not in REPLACED_REQUEST_HEADERS]
    out += [("host", upstream), ("authorization", f"token {token}")]
    cookie = cookies_without(headers, portal_cookies)
    if cookie is not None:
        out.append(("cookie", cookie))
    if any(name == "origin" for name, _ in headers):
        out.append(("origin", f"http://{upstream}"))
    if client:
        forwarded_for = [value for name, value in headers if name == "x-forwarded-for"]
        out.append(("x-forwarded-for", ", ".join([*forwarded_for, client])))
    return [*out, ("x-forwarded-proto", scheme), ("x-forwarded-host", host)]


def handshake_headers(headers: Headers) -> tuple[Headers, str | None, str | None]:
    """``upstream_request_headers``' output split for the websocket library: the headers it does
    not write itself, the Origin and the User-Agent."""
    values = dict(headers)
    rest = [(name, value) for name, value in headers if name not in HANDSHAKE_HEADERS]
    return rest, values.get("origin"), values.get("user-agent")


def downstream_response_headers(
    headers: Headers, *, upstream: str, origin: str, portal_cookies: frozenset[str]
) -> list[tuple[bytes, bytes]]:
    """What the browser gets of the response headers of the server at ``upstream``: the
    end-to-end ones as the server wrote them, but a redirect to the server's own address points
    at the portal (``origin``), no cookie of the portal's may be set, and pages may be framed by
    their own origin only, unless the server said otherwise."""
    upstream_origin = f"http://{upstream}"
    out = []
    for name, value in _end_to_end(headers):
        if name in REPLACED_RESPONSE_HEADERS or (
            name == "set-cookie" and value.split("=", 1)[0].strip() in portal_cookies
        ):
            continue
        if name == "location" and (value + "/").startswith(upstream_origin + "/"):
            value = origin + value.removeprefix(upstream_origin)
        out.append((name, value))
    if not any(name == "x-frame-options" for name, _ in out):
        out.append(("x-frame-options", "SAMEORIGIN"))
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in out]


def origin_trusted(sent: str, *, origin: str, trusted_origins: Iterable[str]) -> bool:
    """Whether ``sent`` (an Origin header) is the portal's ``origin`` or one of
    ``CSRF_TRUSTED_ORIGINS`` (``https://*.example.com`` for subdomains), as Django's CSRF check
    decides."""
    if sent == origin or sent in trusted_origins:
        return True
    try:
        parts = urlsplit(sent)
    except ValueError:
        return False
    return any(
        urlsplit(trusted).scheme == parts.scheme
        and is_same_domain(parts.netloc, urlsplit(trusted).netloc.lstrip("*"))
        for trusted in trusted_origins
        if "*" in trusted
    )


def cross_site_refusal(
    *, method: str, headers: Headers, origin: str, trusted_origins: Iterable[str]
) -> str | None:
    """Why a request may not reach a session as its owner (another site sent it), or ``None``.
    ``method`` is ``WEBSOCKET`` for a handshake, which counts as state-changing. A request with
    the Origin of the portal (or a trusted one) passes; one with another Origin is refused if
    it may change state; one that another site's page made (fetch metadata) passes only as a
    top-level navigation, such as a link followed to the session."""
    values = dict(headers)
    sent = values.get("origin")
    if sent is not None:
        if origin_trusted(sent, origin=origin, trusted_origins=trusted_origins):
            return None
        if method not in SAFE_METHODS:
            return f"A page of {sent} may not use this session."
    if values.get("sec-fetch-site") in (None, "same-origin", "none"):
        return None
    if (
        method == "GET"
        and values.get("sec-fetch-mode") == "navigate"
        and values.get("sec-fetch-dest") not in ("object", "embed")
    ):
        return None
    return "Another site's page may not use this session."


def sendable_close(code: int | None, reason: str | None) -> tuple[int, str]:
    """The close code and reason to pass on for those received: 1005 (none given) is a normal
    close, 1006 (the connection dropped) the other side going away, a code that may not be sent
    an internal error; the reason as much as fits a close frame."""
    reason = (reason or "").encode()[:CLOSE_REASON_MAX_BYTES].decode(errors="ignore")
    if code in SENDABLE_CLOSE_CODES or (code is not None and 3000 <= code <= 4999):
        return code, reason
    return (1000 if code in (None, 1005) else 1001 if code == 1006 else 1011), reason


def refusal_page(*, status: int, message: str, session_id: int | None) -> bytes:
    """A small page saying why, with a link to the session's own page in the portal."""
    title = f"{status} {HTTPStatus(status).phrase}"
    link = (
        f'<p><a href="/interactive/{session_id}/">Session #{session_id} in the portal</a></p>\n'
        if session_id is not None
        else ""
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"</head>\n<body><h1>{title}</h1>\n<p>{html.escape(message)}</p>\n{link}</body></html>\n"
    ).encode()


def portal_cookies() -> frozenset[str]:
    """The cookies the portal sets: its sign-in, CSRF, messages and language."""
    named = (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME, settings.LANGUAGE_COOKIE_NAME)
    return frozenset({*named, CookieStorage.cookie_name})


def _host_allowed(host: str) -> bool:
    """Django's ALLOWED_HOSTS check (``HttpRequest.get_host``)."""
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


def _owners_target(*, session_key: str | None, session_id: int) -> ProxyTarget:
    """The user of ``session_key`` as ``django.contrib.auth.get_user`` finds them (the auth
    hash checked, a session it does not verify flushed), then ``proxy_target``. Runs in a
    thread of its own, with a database connection that ends with it, as Django's requests do."""
    close_old_connections()
    try:
        store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        # Where an old secret (SECRET_KEY_FALLBACKS) verified the hash, Django moves the session
        # to a new key and sets the cookie on the way out. The proxy sets no cookie: it leaves
        # the session where it is for the portal's next page to move.
        store.cycle_key = lambda: None
        user = auth.get_user(SimpleNamespace(session=store))
        return proxy_target(session_id=session_id, user=user)
    finally:
        close_old_connections()


class _ClientLeft(Exception):
    """The client went away while its request body was coming in."""


@dataclass(frozen=True)
class _Route:
    """Session ``session_id``'s server at ``upstream`` (host:port), for a browser on ``origin``."""

    session_id: int
    upstream: str
    origin: str

    def not_answering(self) -> str:
        return (
            f"Session #{self.session_id}'s server is not answering. It may be starting or "
            "stopping: its page in the portal says how it is."
        )


class SessionProxy:
    """Serves ``/sessions/<id>/...`` from the session's notebook server; hands every other
    request to ``app`` (the portal). A websocket elsewhere is refused: the portal has none."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]):
        self.app = app
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        found = session_path(scope["path"]) if kind in ("http", "websocket") else None
        if kind == "websocket":
            await receive()  # websocket.connect
        if found is None:
            if kind == "websocket":
                await _refuse_websocket(scope, send, 404, "No websocket here.", None)
            else:
                await self.app(scope, receive, send)
            return
        session_id = found[0]
        headers = decoded_headers(scope["headers"])
        host = dict(headers).get("host", "")
        scheme = request_scheme(scope.get("scheme", ""), headers, settings.SECURE_PROXY_SSL_HEADER)
        route = _Route(session_id, "", f"{scheme}://{host}")
        try:
            if not _host_allowed(host):
                raise ProxyRefusal(400, "This address does not serve the portal.")
            if not found[1] and kind == "http":
                where = _with_query(f"/sessions/{session_id}/", scope)
                await _respond(send, 302, [(b"location", where.encode("latin-1"))])
                return
            if not found[1]:
                raise ProxyRefusal(404, f"No websocket at /sessions/{session_id}.")
            target = await _check(scope, headers, route)
        except ProxyRefusal as refusal:
            if kind == "websocket":
                await _refuse_websocket(scope, send, refusal.status, refusal.message, session_id)
            elif refusal.status == 401:
                login = redirect_to_login(_with_query(_raw_path(scope), scope)).url
                await _respond(send, 302, [(b"location", login.encode("latin-1"))])
            else:
                await _send_page(send, refusal.status, refusal.message, session_id)
            return
        route = _Route(session_id, target.base_url.split("://", 1)[-1], route.origin)
        forwarded = upstream_request_headers(
            headers,
            upstream=route.upstream,
            token=target.token,
            client=(scope.get("client") or (None,))[0],
            scheme=scheme,
            host=host,
            portal_cookies=portal_cookies(),
        )
        if kind == "websocket":
            await self._websocket(scope, receive, send, route, forwarded)
        else:
            await self._http(scope, receive, send, route, forwarded)

    def _http_client(self) -> httpx.AsyncClient:
        if self._client is None:
            # trust_env off: a proxy named in the environment must never see the token.
            self._client = httpx.AsyncClient(
                trust_env=False,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
            )
        return self._client

    async def _http(
        self, scope: Scope, receive: Receive, send: Send, route: _Route, headers: Headers
    ) -> None:
        incoming = dict(decoded_headers(scope["headers"]))
        has_body = incoming.get("content-length", "0") != "0" or "transfer-encoding" in incoming
        body_read = asyncio.Event()
        if not has_body:  # nothing to read before the client may leave
            body_read.set()
        timeout = httpx.Timeout(None, connect=settings.SESSIONS_PROXY_CONNECT_TIMEOUT_SECONDS)
        try:
            # httpx.Request, not the client's build_request: no default header of the client's
            # (Accept-Encoding above all) may be added to what the browser asked for.
            request = httpx.Request(
                scope["method"],
                httpx.URL(f"http://{route.upstream}").copy_with(
                    raw_path=_with_query(_raw_path(scope), scope).encode("latin-1")
                ),
                headers=headers,
                content=_request_body(receive, body_read) if has_body else None,
                extensions={"timeout": timeout.as_dict()},
            )
        except httpx.InvalidURL:
            await _send_page(send, 502, route.not_answering(), route.session_id)
            return
        relay = asyncio.ensure_future(self._relay(request, send, route))
        watch = asyncio.ensure_future(_client_leaves(receive, body_read))
        try:
            await asyncio.wait({relay, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            relay.cancel()
            watch.cancel()
            await asyncio.gather(relay, watch, return_exceptions=True)
        if not relay.cancelled():
            relay.result()

    async def _relay(self, request: httpx.Request, send: Send, route: _Route) -> None:
        try:
            response = await self._http_client().send(request, stream=True)
        except _ClientLeft:
            return
        except httpx.HTTPError as error:
            logger.warning("session %s: server at %s: %r", route.session_id, route.upstream, error)
            await _send_page(send, 502, route.not_answering(), route.session_id)
            return
        try:
            headers = downstream_response_headers(
                decoded_headers(response.headers.raw),
                upstream=route.upstream,
                origin=route.origin,
                portal_cookies=portal_cookies(),
            )
            start = {"type": "http.response.start", "status": response.status_code}
            await send({**start, "headers": headers})
            # Raw: the body as the server encoded it, matching its Content-Encoding and -Length.
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except OSError:
            pass  # the client left (the serving process raises on a send to it)
        except httpx.HTTPError as error:
            # The response has begun: nothing to say but to leave it unfinished, which the
            # serving process shows the client by closing the connection.
            logger.warning("session %s: server broke off: %r", route.session_id, error)
        finally:
            await response.aclose()

    async def _websocket(
        self, scope: Scope, receive: Receive, send: Send, route: _Route, headers: Headers
    ) -> None:
        rest, origin, user_agent = handshake_headers(headers)
        try:
            server = await websocket_connect(
                f"ws://{route.upstream}{_with_query(_raw_path(scope), scope)}",
                additional_headers=rest,
                origin=origin,
                user_agent_header=user_agent,
                subprotocols=scope.get("subprotocols") or None,
                proxy=None,  # as for HTTP: no proxy from the environment sees the token
                open_timeout=settings.SESSIONS_PROXY_CONNECT_TIMEOUT_SECONDS,
                max_size=WEBSOCKET_MAX_MESSAGE_BYTES,
            )
        except InvalidStatus as refused:
            status = refused.response.status_code
            status = status if 400 <= status < 600 else 502
            message = "The session's server refused."
            await _refuse_websocket(scope, send, status, message, route.session_id)
            return
        except (OSError, TimeoutError, InvalidHandshake, ValueError) as error:
            logger.warning("session %s: server at %s: %r", route.session_id, route.upstream, error)
            await _refuse_websocket(scope, send, 502, route.not_answering(), route.session_id)
            return
        try:
            await send({"type": "websocket.accept", "subprotocol": server.subprotocol})
            await _pump(receive, send, server)
        finally:
            await server.close()


async def _check(scope: Scope, headers: Headers, route: _Route) -> ProxyTarget:
    """The session's server for this request, or the ``ProxyRefusal`` that says why not."""
    reason = cross_site_refusal(
        method="WEBSOCKET" if scope["type"] == "websocket" else scope["method"],
        headers=headers,
        origin=route.origin,
        trusted_origins=settings.CSRF_TRUSTED_ORIGINS,
    )
    if reason is not None:
        raise ProxyRefusal(403, reason)
    cookies = parse_cookie("; ".join(value for name, value in headers if name == "cookie"))
    # As Django runs a request's synchronous code: in a thread of its own.
    async with ThreadSensitiveContext():
        return await sync_to_async(_owners_target, thread_sensitive=True)(
            session_key=cookies.get(settings.SESSION_COOKIE_NAME), session_id=route.session_id
        )


async def _pump(receive: Receive, send: Send, server: ClientConnection) -> None:
    """Pass messages both ways until one side closes, then close the other with its code."""

    async def from_client() -> Message:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return message
            data = message.get("bytes")
            await server.send(data if data is not None else message.get("text") or "")

    async def from_server() -> None:
        async for data in server:
            key = "text" if isinstance(data, str) else "bytes"
            await send({"type": "websocket.send", key: data})

    client_side = asyncio.ensure_future(from_client())
    server_side = asyncio.ensure_future(from_server())
    try:
        await asyncio.wait({client_side, server_side}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        client_side.cancel()
        server_side.cancel()
        await asyncio.gather(client_side, server_side, return_exceptions=True)
    if client_side.done() and not client_side.cancelled() and client_side.exception() is None:
        left = client_side.result()
        await server.close(*sendable_close(left.get("code"), left.get("reason")))
        return
    for side in (client_side, server_side):
        error = None if side.cancelled() else side.exception()
        if error is not None and not isinstance(error, ConnectionClosed | OSError):
            raise error
    # The server closed (or dropped) its side: the client is told with the server's code. The
    # client may have left at the same moment: its server has answered its close already.
    code, reason = sendable_close(server.close_code, server.close_reason)
    with contextlib.suppress(OSError, RuntimeError):
        await send({"type": "websocket.close", "code": code, "reason": reason})


async def _request_body(receive: Receive, read: asyncio.Event) -> AsyncIterator[bytes]:
    """The request body as the client sends it, piece by piece (an upload is never held whole)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientLeft
        yield message.get("body", b"")
        if not message.get("more_body", False):
            read.set()
            return


async def _client_leaves(receive: Receive, body_read: asyncio.Event) -> None:
    """Returns when the client disconnects: once the body is read, ``receive`` has nothing else
    to say. A long poll or an event stream whose client left must not go on upstream."""
    await body_read.wait()
    while (await receive())["type"] != "http.disconnect":
        pass


def _raw_path(scope: Scope) -> str:
    """The path as the client wrote it: escapes such as %2F mean something to the server."""
    raw = scope.get("raw_path")
    return raw.decode("latin-1") if raw else scope["path"]


def _with_query(path: str, scope: Scope) -> str:
    query = scope.get("query_string", b"")
    return f"{path}?{query.decode('latin-1')}" if query else path


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body=b"") -> None:
    length = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + length})
    await send({"type": "http.response.body", "body": body})


async def _send_page(send: Send, status: int, message: str, session_id: int | None) -> None:
    page = refusal_page(status=status, message=message, session_id=session_id)
    await _respond(send, status, PAGE_HEADERS, page)


async def _refuse_websocket(
    scope: Scope, send: Send, status: int, message: str, session_id: int | None
) -> None:
    """Refuse a handshake: with the HTTP status and the page, where the server can send a
    response for a websocket (the ASGI denial extension, uvicorn's); else by closing before
    accepting, with ``4000 + status`` as the code (the server answers 403: gunicorn's)."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 4000 + status})
        return
    page = refusal_page(status=status, message=message, session_id=session_id)
    start = {"type": "websocket.http.response.start", "status": status}
    await send({**start, "headers": PAGE_HEADERS[:1]})
    await send({"type": "websocket.http.response.body", "body": page})
