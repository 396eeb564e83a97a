"""What the session proxy (interactive/proxy.py) passes on, in both directions: pure functions of
headers, no database and no server."""

import pytest

from interactive.proxy import (
    cookies_without,
    cross_site_refusal,
    decoded_headers,
    downstream_response_headers,
    handshake_headers,
    origin_trusted,
    refusal_page,
    request_scheme,
    sendable_close,
    session_path,
    upstream_request_headers,
)

PORTAL_COOKIES = frozenset({"sessionid", "csrftoken", "messages", "django_language"})
UPSTREAM = "10.1.2.3:8888"
PORTAL = "https://gpus.example.com"


def forwarded(headers, **kwargs):
    arguments = {
        "upstream": UPSTREAM,
        "token": "s3cret",
        "client": "192.0.2.7",
        "scheme": "https",
        "host": "gpus.example.com",
        "portal_cookies": PORTAL_COOKIES,
        **kwargs,
    }
    return upstream_request_headers(decoded_headers(headers), **arguments)


def named(headers, name):
    return [value for key, value in headers if key == name]


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ("/sessions/12/", (12, True)),
        ("/sessions/12/lab/tree?x", (12, True)),
        ("/sessions/12", (12, False)),
        ("/sessions/", None),
        ("/sessions/abc/", None),
        ("/sessions/12x/", None),
        ("/interactive/12/", None),
        ("/x/sessions/12/", None),
    ],
)
def test_only_session_paths_are_the_proxys(path, found):
    assert session_path(path) == found


def test_the_server_gets_its_token_instead_of_the_clients_authorization():
    headers = forwarded([(b"Authorization", b"Bearer gpup_usertoken"), (b"Accept", b"*/*")])

    assert named(headers, "authorization") == ["token s3cret"]
    assert named(headers, "accept") == ["*/*"]


def test_the_portals_cookies_stay_with_the_portal_and_the_servers_pass():
    headers = forwarded(
        [
            (b"cookie", b"sessionid=abc; _xsrf=2|x|y; csrftoken=tok"),
            (b"cookie", b"username-10-1-2-3-8888=u; messages=m; django_language=fr; sessionidx=1"),
        ]
    )

    assert named(headers, "cookie") == ["_xsrf=2|x|y; username-10-1-2-3-8888=u; sessionidx=1"]


def test_no_cookie_header_when_only_the_portals_were_sent():
    assert named(forwarded([(b"cookie", b"sessionid=abc; csrftoken=tok")]), "cookie") == []
    assert cookies_without([("cookie", " ; ")], PORTAL_COOKIES) is None


def test_hop_by_hop_headers_and_those_connection_names_are_dropped():
    headers = forwarded(
        [
            (b"connection", b"keep-alive, X-Hop"),
            (b"keep-alive", b"timeout=5"),
            (b"x-hop", b"1"),
            (b"te", b"trailers"),
            (b"transfer-encoding", b"chunked"),
            (b"upgrade", b"h2c"),
            (b"proxy-authorization", b"Basic xyz"),
            (b"expect", b"100-continue"),
            (b"content-type", b"application/json"),
            (b"content-length", b"12"),
        ]
    )

    names = [name for name, _ in headers]
    assert names[:2] == ["content-type", "content-length"]
    for gone in ("connection", "keep-alive", "x-hop", "te", "transfer-encoding", "upgrade"):
        assert gone not in names
    assert "proxy-authorization" not in names
    assert "expect" not in names


def test_host_is_the_servers_and_forwarded_headers_say_where_the_request_came_from():
    headers = forwarded(
        [
            (b"host", b"gpus.example.com"),
            (b"x-forwarded-for", b"203.0.113.9"),
            (b"x-forwarded-host", b"evil.example"),
            (b"x-forwarded-proto", b"http"),
        ]
    )

    assert named(headers, "host") == [UPSTREAM]
    assert named(headers, "x-forwarded-for") == ["203.0.113.9, 192.0.2.7"]
    assert named(headers, "x-forwarded-host") == ["gpus.example.com"]
    assert named(headers, "x-forwarded-proto") == ["https"]


def test_an_origin_sent_is_the_servers_own_and_none_is_added():
    assert named(forwarded([(b"origin", PORTAL.encode())]), "origin") == [f"http://{UPSTREAM}"]
    assert named(forwarded([]), "origin") == []


def test_the_websocket_library_writes_its_own_handshake_headers():
    headers = forwarded(
        [
            (b"host", b"gpus.example.com"),
            (b"origin", PORTAL.encode()),
            (b"user-agent", b"Firefox"),
            (b"upgrade", b"websocket"),
            (b"connection", b"Upgrade"),
            (b"sec-websocket-key", b"k"),
            (b"sec-websocket-version", b"13"),
            (b"sec-websocket-protocol", b"v1.kernel.websocket.jupyter.org"),
            (b"sec-websocket-extensions", b"permessage-deflate"),
            (b"cookie", b"sessionid=abc; _xsrf=x"),
        ]
    )

    rest, origin, user_agent = handshake_headers(headers)

    assert origin == f"http://{UPSTREAM}"
    assert user_agent == "Firefox"
    assert sorted(name for name, _ in rest) == [
        "authorization",
        "cookie",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
    ]
    assert named(rest, "cookie") == ["_xsrf=x"]


def response(headers, **kwargs):
    arguments = {"upstream": UPSTREAM, "origin": PORTAL, "portal_cookies": PORTAL_COOKIES}
    return [
        (name.decode(), value.decode())
        for name, value in downstream_response_headers(
            decoded_headers(headers), **{**arguments, **kwargs}
        )
    ]


def test_the_servers_response_headers_pass_but_hop_by_hop_and_the_servers_date():
    headers = response(
        [
            (b"Content-Type", b"application/json"),
            (b"Content-Encoding", b"gzip"),
            (b"Content-Length", b"42"),
            (b"Transfer-Encoding", b"chunked"),
            (b"Connection", b"close"),
            (b"Date", b"Mon, 01 Jan 2024 00:00:00 GMT"),
            (b"Server", b"TornadoServer/6.4"),
            (b"Content-Security-Policy", b"frame-ancestors 'self'"),
        ]
    )

    assert headers == [
        ("content-type", "application/json"),
        ("content-encoding", "gzip"),
        ("content-length", "42"),
        ("content-security-policy", "frame-ancestors 'self'"),
        ("x-frame-options", "SAMEORIGIN"),
    ]


def test_the_servers_own_framing_rule_is_kept():
    assert named(response([(b"X-Frame-Options", b"DENY")]), "x-frame-options") == ["DENY"]


def test_the_server_may_set_its_cookies_but_never_the_portals():
    headers = response(
        [
            (b"Set-Cookie", b"_xsrf=abc; Path=/sessions/3/"),
            (b"Set-Cookie", b"sessionid=attacker; Path=/"),
            (b"Set-Cookie", b" csrftoken=x; Path=/"),
            (b"Set-Cookie", b"username-1=u; HttpOnly"),
        ]
    )

    assert named(headers, "set-cookie") == [
        "_xsrf=abc; Path=/sessions/3/",
        "username-1=u; HttpOnly",
    ]


@pytest.mark.parametrize(
    ("location", "seen"),
    [
        (f"http://{UPSTREAM}/sessions/3/lab?x=1", f"{PORTAL}/sessions/3/lab?x=1"),
        (f"http://{UPSTREAM}", PORTAL),
        ("/sessions/3/lab", "/sessions/3/lab"),
        (f"http://{UPSTREAM}9/x", f"http://{UPSTREAM}9/x"),
        ("https://example.org/", "https://example.org/"),
    ],
)
def test_a_redirect_to_the_servers_address_points_at_the_portal(location, seen):
    assert named(response([(b"Location", location.encode())]), "location") == [seen]


@pytest.mark.parametrize(
    ("scheme", "headers", "proxy_ssl_header", "expected"),
    [
        ("http", [], None, "http"),
        ("https", [], None, "https"),
        ("wss", [], None, "https"),
        ("http", [("x-forwarded-proto", "https")], None, "http"),
        ("http", [("x-forwarded-proto", "https")], ("HTTP_X_FORWARDED_PROTO", "https"), "https"),
        ("https", [("x-forwarded-proto", "http")], ("HTTP_X_FORWARDED_PROTO", "https"), "http"),
        (
            "http",
            [("x-forwarded-proto", "https, http")],
            ("HTTP_X_FORWARDED_PROTO", "https"),
            "https",
        ),
        ("http", [], ("HTTP_X_FORWARDED_PROTO", "https"), "http"),
    ],
)
def test_the_scheme_is_the_browsers_as_django_reads_it(scheme, headers, proxy_ssl_header, expected):
    assert request_scheme(scheme, headers, proxy_ssl_header) == expected


@pytest.mark.parametrize(
    ("sent", "trusted"),
    [
        (PORTAL, True),
        ("http://gpus.example.com", False),
        ("https://gpus.example.com:8443", False),
        ("https://evil.example", False),
        ("null", False),
        ("https://portal.corp.example", True),
        ("https://a.b.corp.example", True),
        ("http://a.corp.example", False),
        ("https://corp.example.evil", False),
        ("https://other.example", True),
    ],
)
def test_an_origin_is_trusted_as_djangos_csrf_check_trusts_it(sent, trusted):
    assert (
        origin_trusted(
            sent, origin=PORTAL, trusted_origins=["https://*.corp.example", "https://other.example"]
        )
        is trusted
    )


def refusal(method, **headers):
    return cross_site_refusal(
        method=method,
        headers=[(name.replace("_", "-"), value) for name, value in headers.items()],
        origin=PORTAL,
        trusted_origins=[],
    )


def test_the_portals_own_pages_and_plain_clients_pass():
    assert refusal("POST", origin=PORTAL, sec_fetch_site="same-origin") is None
    assert refusal("WEBSOCKET", origin=PORTAL) is None
    assert refusal("POST") is None  # a client that is no browser: no cross-site request
    assert refusal("WEBSOCKET") is None
    assert refusal("GET", sec_fetch_site="none", sec_fetch_mode="navigate") is None


def test_another_origin_may_not_change_anything_nor_open_a_websocket():
    assert "https://evil.example" in refusal("POST", origin="https://evil.example")
    assert refusal("DELETE", origin="null") is not None
    assert refusal("WEBSOCKET", origin="https://evil.example") is not None
    assert refusal("WEBSOCKET", origin="http://gpus.example.com") is not None


def test_another_site_may_link_to_a_session_but_not_load_from_it():
    navigation = {"sec_fetch_site": "cross-site", "sec_fetch_mode": "navigate"}
    assert refusal("GET", sec_fetch_dest="document", **navigation) is None
    assert refusal("GET", sec_fetch_dest="embed", **navigation) is not None
    assert refusal("POST", sec_fetch_dest="document", **navigation) is not None
    assert refusal("GET", sec_fetch_site="cross-site", sec_fetch_mode="no-cors") is not None
    assert refusal("GET", sec_fetch_site="same-site", sec_fetch_mode="cors") is not None
    assert (
        refusal(
            "GET", origin="https://evil.example", sec_fetch_site="cross-site", sec_fetch_mode="cors"
        )
        is not None
    )


@pytest.mark.parametrize(
    ("received", "sent"),
    [
        (1000, 1000),
        (1001, 1001),
        (1011, 1011),
        (4321, 4321),
        (3000, 3000),
        (None, 1000),
        (1005, 1000),
        (1006, 1001),
        (1015, 1011),
        (1004, 1011),
        (2000, 1011),
        (5000, 1011),
    ],
)
def test_close_codes_pass_as_sendable_ones(received, sent):
    assert sendable_close(received, "why") == (sent, "why")


def test_a_close_reason_fits_a_close_frame():
    assert sendable_close(1000, None) == (1000, "")
    assert len(sendable_close(1000, "é" * 100)[1].encode()) <= 123


def test_a_refusal_page_escapes_its_message_and_links_to_the_sessions_page():
    page = refusal_page(status=403, message="<b>bob</b>'s session", session_id=7).decode()

    assert "<title>403 Forbidden</title>" in page
    assert "&lt;b&gt;bob&lt;/b&gt;&#x27;s session" in page
    assert "<b>" not in page
    assert '<a href="/interactive/7/">' in page
    assert "/interactive/" not in refusal_page(status=404, message="x", session_id=None).decode()
