"""The portal's proxy to sessions (interactive/proxy.py), end to end over real sockets: the portal
served by uvicorn (as the demo serves it) and by gunicorn's asgi worker (as the image serves it)
on the test database, in front of a stand-in notebook server of our own, served by uvicorn in a
thread of this process, which answers every request with what it received and echoes websocket
messages. The browser is played by httpx and the ``websockets`` client, signed in with a real
session cookie of the portal's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading

import httpx
import pytest
import uvicorn
from django.conf import settings
from django.http.cookie import parse_cookie
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from interactive.models import InteractiveSession
from tenants.models import Membership
from tests import factories
from tests.integration.conftest import free_port, wait_for
from tests.integration.servers import demo_server, portal_server

# The portal process reads the rows each test writes: they must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

KERNEL_PROTOCOL = "v1.kernel.websocket.jupyter.org"


class NotebookServer:
    """A stand-in for a session's notebook server. HTTP: answers with what it received as JSON;
    ``.../stream`` writes a line, waits for ``release``, writes another; ``.../forever`` writes
    until its client leaves, then sets ``ended``; ``.../redirect`` redirects to its own address
    and sets cookies. Websockets: records each handshake, accepts the first subprotocol asked
    for, echoes text and bytes, closes with 4321 when sent ``close-me``, records close codes."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests: list[dict] = []
        self.handshakes: list[dict] = []
        self.closes: list[int] = []
        self.release = threading.Event()
        self.ended = threading.Event()

    async def __call__(self, scope, receive, send):
        seen = {
            "method": scope.get("method"),
            "path": scope["path"],
            "raw_path": scope["raw_path"].decode(),
            "query": scope["query_string"].decode(),
            "headers": [[k.decode(), v.decode()] for k, v in scope["headers"]],
        }
        if scope["type"] == "websocket":
            await self.websocket(seen, scope, receive, send)
            return
        self.requests.append(seen)
        tail = scope["path"].rsplit("/", 1)[-1]
        if tail == "stream":
            await self.stream(send)
        elif tail == "forever":
            await self.forever(receive, send)
        elif tail == "redirect":
            host = dict(seen["headers"])["host"]
            await send(
                {
                    "type": "http.response.start",
                    "status": 302,
                    "headers": [
                        (b"location", f"http://{host}/sessions/1/lab".encode()),
                        (b"set-cookie", b"sessionid=planted; Path=/"),
                        (b"set-cookie", b"_xsrf=fresh; Path=/sessions/1/"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
        else:
            await self.echo(seen, receive, send)

    async def echo(self, seen, receive, send):
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen["body_length"] = len(body)
        seen["body_sha256"] = hashlib.sha256(body).hexdigest()
        seen["body"] = body.decode(errors="replace") if len(body) < 4096 else None
        payload = json.dumps(seen).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"x-upstream", b"yes")],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def stream(self, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
        released = await asyncio.to_thread(self.release.wait, 30)
        await send({"type": "http.response.body", "body": b"second\n" if released else b"late\n"})

    async def forever(self, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})

        async def tick():
            while True:
                await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
                await asyncio.sleep(0.05)

        ticking = asyncio.ensure_future(tick())
        while (await receive())["type"] != "http.disconnect":
            pass
        ticking.cancel()
        self.ended.set()

    async def websocket(self, seen, scope, receive, send):
        await receive()  # websocket.connect
        seen["subprotocols"] = scope["subprotocols"]
        self.handshakes.append(seen)
        asked = scope["subprotocols"]
        await send({"type": "websocket.accept", "subprotocol": asked[0] if asked else None})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                self.closes.append(message["code"])
                return
            if message.get("text") == "close-me":
                await send({"type": "websocket.close", "code": 4321, "reason": "asked to"})
                return
            if message.get("text") is not None:
                await send({"type": "websocket.send", "text": "echo: " + message["text"]})
            else:
                await send({"type": "websocket.send", "bytes": b"echo: " + message["bytes"]})


@pytest.fixture(scope="module")
def notebook_server():
    app = NotebookServer()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=15, what="the stand-in notebook server")
    app.address = f"127.0.0.1:{port}"
    yield app
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def notebook(notebook_server):
    notebook_server.reset()
    return notebook_server


@pytest.fixture(scope="module")
def portal(postgres_database, tmp_path_factory):
    """The portal as the demo serves it (scripts/demo.sh): uvicorn, on the test database."""
    with demo_server(postgres_database, tmp_path_factory.mktemp("session-proxy")) as base:
        yield base


@pytest.fixture
def http(portal):
    with httpx.Client(base_url=portal, timeout=10) as client:
        yield client


def signed_in(user) -> str:
    """The portal's session cookie for ``user``, as signing in sets it."""
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def cookies(user, **others) -> dict[str, str]:
    """A browser's Cookie header: the portal's own cookies, and the notebook server's."""
    jar = {
        settings.SESSION_COOKIE_NAME: signed_in(user),
        settings.CSRF_COOKIE_NAME: "portal-csrf",
        "_xsrf": "2|jupyter|xsrf",
        "username-127-0-0-1": "jupyter-user",
        **others,
    }
    return {"Cookie": "; ".join(f"{name}={value}" for name, value in jar.items())}


@pytest.fixture
def owner(member):
    return member


@pytest.fixture
def teammate(team):
    user = factories.UserFactory(username="tess-teammate")
    factories.MembershipFactory(team=team, user=user, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def session_of(team, cluster, notebook):
    def make(owner, *, state=InteractiveSession.State.RUNNING, address=None):
        return InteractiveSession.objects.create(
            team=team,
            cluster=cluster,
            owner=owner,
            name="lab",
            image="registry.example.com/jupyter:1",
            cpu_cores=1,
            memory_gib=2,
            max_lifetime_seconds=3600,
            state=state,
            server_address=address or notebook.address,
        )

    return make


@pytest.fixture
def session(session_of, owner):
    return session_of(owner)


def header(seen: dict, name: str) -> list[str]:
    return [value for key, value in seen["headers"] if key == name]


def ws_url(portal: str, path: str) -> str:
    return portal.replace("http://", "ws://") + path


# --- HTTP -------------------------------------------------------------------------------------


def test_the_owner_reaches_the_server_with_its_token_and_without_the_portals_cookies(
    http, portal, notebook, session, owner
):
    answer = http.get(
        f"/sessions/{session.pk}/api/status?x=1&y=%2F",
        headers={**cookies(owner), "Authorization": "Bearer gpup_users-own-token"},
    )

    assert answer.status_code == 200, answer.text
    seen = answer.json()
    assert seen["method"] == "GET"
    assert seen["raw_path"] == f"/sessions/{session.pk}/api/status"
    assert seen["query"] == "x=1&y=%2F"
    assert header(seen, "authorization") == [f"token {session.token}"]
    sent_cookies = parse_cookie(header(seen, "cookie")[0])
    assert sent_cookies == {"_xsrf": "2|jupyter|xsrf", "username-127-0-0-1": "jupyter-user"}
    assert header(seen, "host") == [notebook.address]
    assert header(seen, "x-forwarded-host") == [portal.removeprefix("http://")]
    assert header(seen, "x-forwarded-proto") == ["http"]
    assert header(seen, "x-forwarded-for") == ["127.0.0.1"]
    assert answer.headers["x-upstream"] == "yes"
    assert answer.headers["x-frame-options"] == "SAMEORIGIN"
    assert "content-security-policy" not in answer.headers  # the portal's is for its pages


def test_an_escaped_path_reaches_the_server_as_written(http, notebook, session, owner):
    path = f"/sessions/{session.pk}/api/contents/a%2Fb%20c.ipynb"

    seen = http.get(path, headers=cookies(owner)).json()

    assert seen["raw_path"] == path


def test_a_post_body_reaches_the_server(http, portal, session, owner):
    answer = http.post(
        f"/sessions/{session.pk}/api/contents",
        json={"type": "notebook"},
        headers={**cookies(owner), "Origin": portal},
    )

    seen = answer.json()
    assert seen["method"] == "POST"
    assert json.loads(seen["body"]) == {"type": "notebook"}
    assert header(seen, "content-type") == ["application/json"]


def test_a_large_upload_streams_through_whole(http, session, owner):
    piece = bytes(range(256)) * 256  # 64 KiB
    pieces = 128  # 8 MiB, sent chunked: its length unknown to the proxy

    answer = http.put(
        f"/sessions/{session.pk}/api/contents/big.bin",
        content=(piece for _ in range(pieces)),
        headers=cookies(owner),
    )

    seen = answer.json()
    assert seen["body_length"] == len(piece) * pieces
    assert seen["body_sha256"] == hashlib.sha256(piece * pieces).hexdigest()


def test_a_response_reaches_the_client_as_the_server_writes_it(portal, notebook, session, owner):
    with (
        httpx.Client(base_url=portal, timeout=5) as client,
        client.stream("GET", f"/sessions/{session.pk}/stream", headers=cookies(owner)) as answer,
    ):
        chunks = answer.iter_raw()
        # Buffered, the first line would come only with the second, which waits for this.
        assert next(chunks) == b"first\n"
        notebook.release.set()
        assert b"".join(chunks) == b"second\n"


def test_a_client_that_leaves_ends_its_request_to_the_server(portal, notebook, session, owner):
    with (
        httpx.Client(base_url=portal, timeout=5) as client,
        client.stream("GET", f"/sessions/{session.pk}/forever", headers=cookies(owner)) as answer,
    ):
        assert next(answer.iter_raw()).startswith(b"tick")

    wait_for(notebook.ended.is_set, timeout=10, what="the server to see its client leave")


def test_redirects_point_at_the_portal_and_the_server_cannot_set_the_portals_cookies(
    http, portal, session, owner
):
    answer = http.get(f"/sessions/{session.pk}/redirect", headers=cookies(owner))

    assert answer.status_code == 302
    assert answer.headers["location"] == f"{portal}/sessions/1/lab"
    assert answer.headers.get_list("set-cookie") == ["_xsrf=fresh; Path=/sessions/1/"]


def test_a_session_path_without_its_slash_redirects_to_it(http, session):
    answer = http.get(f"/sessions/{session.pk}?reset=1")

    assert answer.status_code == 302
    assert answer.headers["location"] == f"/sessions/{session.pk}/?reset=1"


def test_other_paths_are_the_portals(http):
    assert "csrfmiddlewaretoken" in http.get("/login/").text


# --- who gets in ------------------------------------------------------------------------------


def test_a_visitor_who_has_not_signed_in_is_sent_to_sign_in(http, notebook, session):
    answer = http.get(f"/sessions/{session.pk}/lab?reset")

    assert answer.status_code == 302
    assert answer.headers["location"] == f"/login/?next=/sessions/{session.pk}/lab%3Freset"
    assert notebook.requests == []


def test_a_sign_in_from_before_a_password_change_no_longer_opens_the_session(
    http, notebook, session, owner
):
    headers = cookies(owner)
    owner.set_password("a-new-password-entirely")
    owner.save()

    answer = http.get(f"/sessions/{session.pk}/lab", headers=headers)

    assert answer.status_code == 302
    assert answer.headers["location"].startswith("/login/?next=")
    assert notebook.requests == []


def test_a_teammate_may_not_open_the_owners_session(http, notebook, session, teammate):
    answer = http.get(f"/sessions/{session.pk}/lab", headers=cookies(teammate))

    assert answer.status_code == 403
    assert "mo-member&#x27;s: only they open it" in answer.text
    assert f'href="/interactive/{session.pk}/"' in answer.text
    assert notebook.requests == []


def test_a_member_of_another_team_is_told_there_is_no_such_session(
    http, notebook, session, other_lead
):
    answer = http.get(f"/sessions/{session.pk}/lab", headers=cookies(other_lead))

    assert answer.status_code == 404
    assert f"No session #{session.pk}." in answer.text
    assert notebook.requests == []


def test_a_stopped_session_is_not_forwarded(http, notebook, session_of, owner):
    stopped = session_of(owner, state=InteractiveSession.State.STOPPED)

    answer = http.get(f"/sessions/{stopped.pk}/lab", headers=cookies(owner))

    assert answer.status_code == 409
    assert "is stopped, not running" in answer.text
    assert notebook.requests == []


def test_a_server_that_does_not_answer_gives_502(http, session_of, owner):
    down = session_of(owner, address=f"127.0.0.1:{free_port()}")

    answer = http.get(f"/sessions/{down.pk}/lab", headers=cookies(owner))

    assert answer.status_code == 502
    assert "server is not answering" in answer.text


def test_another_sites_page_may_not_post_to_a_session(http, notebook, session, owner):
    answer = http.post(
        f"/sessions/{session.pk}/api/kernels",
        json={},
        headers={**cookies(owner), "Origin": "http://evil.example"},
    )

    assert answer.status_code == 403
    assert notebook.requests == []


def test_a_host_the_portal_does_not_serve_is_refused(http, notebook, session, owner):
    answer = http.get(
        f"/sessions/{session.pk}/lab", headers={**cookies(owner), "Host": "evil.example"}
    )

    assert answer.status_code == 400
    assert notebook.requests == []


# --- websockets -------------------------------------------------------------------------------


def kernel_channels(portal, session, **kwargs):
    return connect(
        ws_url(portal, f"/sessions/{session.pk}/api/kernels/k-1/channels?session_id=s%2F1"),
        open_timeout=10,
        **kwargs,
    )


def test_a_websocket_round_trips_text_and_bytes(portal, notebook, session, owner):
    with kernel_channels(
        portal,
        session,
        additional_headers=cookies(owner),
        origin=portal,
        subprotocols=[KERNEL_PROTOCOL, "other"],
    ) as ws:
        ws.send("hello")
        assert ws.recv(timeout=5) == "echo: hello"
        ws.send(b"\x00\xffbinary")
        assert ws.recv(timeout=5) == b"echo: \x00\xffbinary"
        assert ws.subprotocol == KERNEL_PROTOCOL

    (seen,) = notebook.handshakes
    assert seen["raw_path"] == f"/sessions/{session.pk}/api/kernels/k-1/channels"
    assert seen["query"] == "session_id=s%2F1"
    assert seen["subprotocols"] == [KERNEL_PROTOCOL, "other"]
    assert header(seen, "authorization") == [f"token {session.token}"]
    assert parse_cookie(header(seen, "cookie")[0]) == {
        "_xsrf": "2|jupyter|xsrf",
        "username-127-0-0-1": "jupyter-user",
    }
    assert header(seen, "origin") == [f"http://{notebook.address}"]
    assert header(seen, "host") == [notebook.address]


def test_the_servers_close_code_reaches_the_client(portal, session, owner):
    with kernel_channels(portal, session, additional_headers=cookies(owner)) as ws:
        ws.send("close-me")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)

    assert closed.value.rcvd.code == 4321
    assert closed.value.rcvd.reason == "asked to"


def test_the_clients_close_code_reaches_the_server(portal, notebook, session, owner):
    with kernel_channels(portal, session, additional_headers=cookies(owner)) as ws:
        ws.send("hi")
        ws.recv(timeout=5)
        ws.close(code=4000, reason="tab closed")

    wait_for(lambda: notebook.closes, timeout=10, what="the server to see the close")
    assert notebook.closes == [4000]


def refused_status(portal, session, **kwargs) -> int:
    with pytest.raises(InvalidStatus) as refused, kernel_channels(portal, session, **kwargs):
        pass
    return refused.value.response.status_code


def test_websockets_are_refused_as_http_is(portal, notebook, session, session_of, owner, teammate):
    stopped = session_of(owner, state=InteractiveSession.State.STOPPED)
    down = session_of(owner, address=f"127.0.0.1:{free_port()}")

    assert refused_status(portal, session) == 401
    assert refused_status(portal, session, additional_headers=cookies(teammate)) == 403
    assert refused_status(portal, stopped, additional_headers=cookies(owner)) == 409
    assert refused_status(portal, down, additional_headers=cookies(owner)) == 502
    assert notebook.handshakes == []


def test_a_websocket_from_another_sites_page_is_refused(portal, notebook, session, owner):
    status = refused_status(
        portal, session, additional_headers=cookies(owner), origin="http://evil.example"
    )

    assert status == 403
    assert notebook.handshakes == []


def test_a_websocket_elsewhere_is_refused(portal, owner):
    with (
        pytest.raises(InvalidStatus) as refused,
        connect(ws_url(portal, "/login/"), open_timeout=10),
    ):
        pass

    assert refused.value.response.status_code == 404


# --- as the image serves it -------------------------------------------------------------------


def test_the_production_server_proxies_http_and_websockets(
    postgres_database, tmp_path, notebook, session, owner
):
    """gunicorn's asgi worker (the Dockerfile's CMD) carries websockets too. It has no way to
    answer a handshake with a status of the application's choosing: refusals are 403."""
    with portal_server(postgres_database, tmp_path, DJANGO_SECRET_KEY=settings.SECRET_KEY) as base:
        answer = httpx.get(f"{base}/sessions/{session.pk}/api/status", headers=cookies(owner))
        assert answer.status_code == 200, answer.text
        assert header(answer.json(), "authorization") == [f"token {session.token}"]

        with kernel_channels(base, session, additional_headers=cookies(owner)) as ws:
            ws.send("hello")
            assert ws.recv(timeout=5) == "echo: hello"
            ws.send(b"bytes")
            assert ws.recv(timeout=5) == b"echo: bytes"

        assert refused_status(base, session) == 403
