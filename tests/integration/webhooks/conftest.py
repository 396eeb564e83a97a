"""A real HTTP receiver for webhooks, run by the test in a thread: it is the receiving side
itself (what a chat service or a team's own endpoint does: take the POST, answer a status)."""

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers each POST with the next status of ``answers`` (the last one once they run
    out) and keeps what it got."""

    answers: list[int] = field(default_factory=lambda: [200])
    received: list[Received] = field(default_factory=list)
    extra_headers: dict[str, str] = field(default_factory=dict)
    url: str = ""
    got: threading.Condition = field(default_factory=threading.Condition)

    def answer(self) -> int:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        with self.got:
            if not self.got.wait_for(lambda: len(self.received) >= count, timeout=timeout):
                pytest.fail(f"the receiver got {len(self.received)} of {count} requests")
        return self.received


def _handler(receiver: Receiver):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            # Kept before answering: the sender may hang up as soon as it has the status.
            with receiver.got:
                receiver.received.append(Received(self.path, dict(self.headers.items()), body))
                status = receiver.answer()
                receiver.got.notify_all()
            self.send_response(status)
            for name, value in receiver.extra_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok" if status < 300 else f"answered {status}".encode())

        def log_message(self, *args):  # quiet
            pass

    return Handler


@pytest.fixture
def receiver(settings):
    """``receiver.url`` takes POSTs on 127.0.0.1 (another port than any portal's), an internal
    host the tests' admin allows (``WEBHOOKS_ALLOWED_INTERNAL_HOSTS``)."""
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = ["127.0.0.1"]
    made = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(made))
    made.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield made
    server.shutdown()
    server.server_close()
