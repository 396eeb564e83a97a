"""The client against a server that drops a request's connection without answering, as gunicorn
does when it closes an idle kept-alive connection just as the client reuses it."""

import socket
import threading

import pytest

from gpuportal import exits
from gpuportal.client import ApiError, Client

ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n"
    b'Connection: close\r\n\r\n{"ok": true}'
)


@pytest.fixture
def drops_first_request():
    """A TCP server whose first connection is closed once a request arrives on it, unanswered;
    later connections get a JSON answer. Yields its URL and the number of requests it read."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                seen.append(1)
                if len(seen) > 1:
                    connection.sendall(ANSWER)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    listener.close()


def test_a_get_is_asked_again_once_on_a_new_connection(drops_first_request):
    url, seen = drops_first_request
    with Client(url) as api:
        assert api.get("jobs/1/") == {"ok": True}
    assert len(seen) == 2


def test_a_post_is_not_sent_twice(drops_first_request):
    url, seen = drops_first_request
    with Client(url) as api, pytest.raises(ApiError) as error:
        api.post("jobs/1/cancel/")
    assert error.value.exit_code == exits.SERVER
    assert len(seen) == 1
