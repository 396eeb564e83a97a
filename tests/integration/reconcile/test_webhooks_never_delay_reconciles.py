"""A slow webhook receiver never delays a reconcile: deliveries go to a Celery queue of their own
(``WEBHOOKS_QUEUE``, routed by ``portal.celery.route_task``), read by a worker of its own.

A delivery goes to a receiver that answers one byte every two seconds: each byte comes well
within any read timeout, and the delivery's total deadline cuts it. While it trickles, an
approval enqueues the team's reconcile, which the ordinary worker applies before the cut. (With
one worker reading both queues the reconcile would wait for the cut: the test fails so.)"""

import socket
import threading
import time
import uuid

import pytest

from portal.celery import app as celery_app
from tests import factories
from tests.integration.conftest import wait_for
from webhooks import services
from webhooks.models import Delivery

from .conftest import in_sync

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

DEADLINE_SECONDS = 20
# The reconcile must be applied well before the delivery is cut.
RECONCILED_WITHIN_SECONDS = 12


class TricklingReceiver:
    """Takes one connection, reads the request, then answers a byte every two seconds until the
    sender hangs up; keeps when it connected and when it was cut."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.connected = threading.Event()
        self.connected_at = self.cut_at = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        connection, _ = self.server.accept()
        with connection:
            connection.recv(65536)
            self.connected_at = time.monotonic()
            self.connected.set()
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
                if self.stop.wait(2):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    self.cut_at = time.monotonic()
                    return

    @property
    def still_trickling(self) -> bool:
        return self.connected.is_set() and self.cut_at is None

    def close(self):
        self.stop.set()
        self.server.close()


@pytest.fixture
def trickling_receiver():
    receiver = TricklingReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def webhooks_queue(settings):
    """The deliveries' queue of this test: the router reads the setting at each send."""
    queue = f"webhooks-test-{uuid.uuid4().hex[:8]}"
    settings.WEBHOOKS_QUEUE = queue
    yield queue
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_delete(queue)


def test_a_reconcile_enqueued_while_a_delivery_trickles_is_applied_before_the_cut(
    kube_cluster,
    make_team,
    approve,
    admin_user,
    own_queue,
    webhooks_queue,
    start_worker,
    trickling_receiver,
):
    team = make_team("hooks")
    webhook = factories.WebhookFactory(
        team=team, url=trickling_receiver.url, events=["gpu_job.failed"]
    )
    start_worker(own_queue)
    start_worker(
        webhooks_queue,
        env={
            "WEBHOOKS_QUEUE": webhooks_queue,
            "WEBHOOKS_TIMEOUT_SECONDS": str(DEADLINE_SECONDS),
            "WEBHOOKS_ALLOWED_INTERNAL_HOSTS": "127.0.0.1",
            "WEBHOOKS_RETRY_BASE_SECONDS": "600",
        },
    )

    services.webhook_send_test(actor=admin_user, webhook=webhook)
    assert trickling_receiver.connected.wait(30), "the delivery never reached the receiver"

    approve(team, kube_cluster, gpus=2)

    in_sync(team, kube_cluster, timeout=RECONCILED_WITHIN_SECONDS)
    assert trickling_receiver.still_trickling, "the reconcile waited for the delivery"
    delivery = wait_for(
        lambda: (d := Delivery.objects.get(webhook__team=team)).error and d,
        timeout=DEADLINE_SECONDS + 30,
        what="the delivery to be cut",
    )
    assert delivery.error == f"No answer within {DEADLINE_SECONDS} s: cut at the deadline"
    assert delivery.status == Delivery.Status.PENDING  # tried again after the backoff
    assert delivery.attempts == 1
    cut_after = time.monotonic() - trickling_receiver.connected_at
    assert DEADLINE_SECONDS - 1 < cut_after < DEADLINE_SECONDS + 10
