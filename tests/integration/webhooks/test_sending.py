"""Sending a delivery to a real receiver (run by the test): the signed POST, what is recorded
of the answer, and when it is tried again. The sender runs in the test's process here;
test_worker.py sends through a Celery worker."""

import datetime
import json
import socket
import threading
import time

import pytest
from django.utils import timezone

from tests import factories
from webhooks import targets
from webhooks.models import Delivery
from webhooks.payloads import body_bytes
from webhooks.sending import deliveries_due, delivery_send
from webhooks.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature_valid,
)

pytestmark = pytest.mark.django_db
Status = Delivery.Status


@pytest.fixture(autouse=True)
def _schedule(settings):
    settings.WEBHOOKS_MAX_ATTEMPTS = 3
    settings.WEBHOOKS_RETRY_BASE_SECONDS = 10
    settings.WEBHOOKS_RETRY_MAX_SECONDS = 15
    settings.WEBHOOKS_TIMEOUT_SECONDS = 5


@pytest.fixture
def delivery(receiver, team):
    webhook = factories.WebhookFactory(team=team, url=receiver.url, secret="s3cret-of-the-hook")
    return factories.DeliveryFactory(
        webhook=webhook, event="gpu_job.failed", payload={"event": "gpu_job.failed", "n": "é"}
    )


def test_a_delivery_is_posted_signed_and_recorded_as_succeeded(receiver, delivery):
    outcome = delivery_send(delivery_id=delivery.pk)

    assert outcome.status == Status.SUCCEEDED
    assert outcome.retry_in is None
    [got] = receiver.received
    assert got.path == "/hook"
    assert got.body == body_bytes(delivery.payload)
    assert got.json == {"event": "gpu_job.failed", "n": "é"}
    assert got.headers[EVENT_HEADER] == "gpu_job.failed"
    assert got.headers[DELIVERY_HEADER] == str(delivery.pk)
    assert got.headers["Content-Type"] == "application/json"
    assert signature_valid(
        "s3cret-of-the-hook",
        timestamp=got.headers[TIMESTAMP_HEADER],
        body=got.body,
        signed=got.headers[SIGNATURE_HEADER],
        now=int(time.time()),
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (
        Status.SUCCEEDED,
        1,
        200,
    )
    assert delivery.delivered_at is not None
    assert delivery.next_attempt_at is None


def test_a_failed_attempt_is_tried_again_after_the_backoff(receiver, delivery):
    receiver.answers = [500]
    before = timezone.now()

    outcome = delivery_send(delivery_id=delivery.pk)

    assert outcome.status == Status.PENDING
    assert outcome.retry_in == 10
    delivery.refresh_from_db()
    assert delivery.status == Status.PENDING
    assert delivery.attempts == 1
    assert delivery.response_code == 500
    assert delivery.error == "HTTP 500 Internal Server Error"
    assert delivery.next_attempt_at >= before + datetime.timedelta(seconds=10)
    # Not due yet: a second sender (or a duplicate message) does nothing.
    assert delivery_send(delivery_id=delivery.pk) is None
    assert len(receiver.received) == 1


def test_retries_back_off_then_the_delivery_fails_at_the_last_attempt(receiver, delivery):
    receiver.answers = [503]
    retries = []
    for _ in range(3):
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        retries.append(delivery_send(delivery_id=delivery.pk).retry_in)

    assert retries == [10, 15, None]  # doubled, capped, then no more
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (Status.FAILED, 3)
    assert delivery.next_attempt_at is None
    assert len(receiver.received) == 3


def test_a_redirect_is_not_followed(receiver, delivery):
    receiver.answers = [302]
    receiver.extra_headers = {"Location": "http://127.0.0.1:1/elsewhere"}

    delivery_send(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert delivery.status == Status.PENDING
    assert delivery.error == "HTTP 302: redirects are not followed"
    assert len(receiver.received) == 1


def test_a_receiver_that_is_not_there_is_an_error_to_retry(delivery, receiver):
    delivery.webhook.url = "http://127.0.0.1:9/nobody-listens"
    delivery.webhook.save()

    outcome = delivery_send(delivery_id=delivery.pk)

    assert outcome.status == Status.PENDING
    delivery.refresh_from_db()
    assert delivery.response_code is None
    assert delivery.error.startswith("ConnectError")


def test_a_delivery_is_sent_once_however_often_it_is_asked(receiver, delivery):
    assert delivery_send(delivery_id=delivery.pk).status == Status.SUCCEEDED
    assert delivery_send(delivery_id=delivery.pk) is None
    assert len(receiver.received) == 1


def test_a_turned_off_webhook_is_not_sent_its_events(receiver, delivery):
    delivery.webhook.active = False
    delivery.webhook.save()

    assert delivery_send(delivery_id=delivery.pk).status == Status.FAILED
    assert receiver.received == []
    delivery.refresh_from_db()
    assert "turned off" in delivery.error


def test_the_sweep_finds_due_and_stale_deliveries_only(delivery, settings):
    later = factories.DeliveryFactory(
        webhook=delivery.webhook, next_attempt_at=timezone.now() + datetime.timedelta(hours=1)
    )
    stale = factories.DeliveryFactory(
        webhook=delivery.webhook,
        status=Status.SENDING,
        last_attempt_at=timezone.now() - datetime.timedelta(hours=1),
    )
    busy = factories.DeliveryFactory(
        webhook=delivery.webhook, status=Status.SENDING, last_attempt_at=timezone.now()
    )
    done = factories.DeliveryFactory(webhook=delivery.webhook, status=Status.SUCCEEDED)

    due = deliveries_due()

    assert set(due) == {delivery.pk, stale.pk}
    assert not {later.pk, busy.pk, done.pk} & set(due)
    stale.refresh_from_db()
    assert stale.status == Status.PENDING


def test_the_body_sent_is_the_payload_as_json(receiver, delivery):
    delivery_send(delivery_id=delivery.pk)
    assert json.loads(receiver.received[0].body) == delivery.payload


def test_what_the_receiver_answers_is_never_kept(receiver, delivery):
    """A webhook may point at any address the portal reaches: its answers' bodies must not
    become readable through the deliveries."""
    receiver.answers = [404]

    delivery_send(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert delivery.error == "HTTP 404 Not Found"
    assert "answered" not in str(Delivery.objects.filter(pk=delivery.pk).values().get())


def test_an_internal_receiver_no_admin_allowed_is_not_posted_to(receiver, delivery, settings):
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = []  # saved while allowed, then taken off

    outcome = delivery_send(delivery_id=delivery.pk)

    assert outcome.status == Status.PENDING
    assert receiver.received == []
    delivery.refresh_from_db()
    assert delivery.error.startswith("Not sent: Points at an internal address (127.0.0.1)")


def test_a_name_that_resolves_elsewhere_at_sending_is_checked_again(
    receiver, delivery, settings, monkeypatch
):
    """The name resolved to a public address when the webhook was saved; by the time of the
    delivery its DNS says 127.0.0.1 (rebinding). The resolver is the one thing replaced here:
    the sandbox has no DNS server of its own to change."""
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = []
    answers = {"hooks.example.com": "93.184.216.34"}

    def resolver(host, port, *args, **kwargs):
        return [(2, 1, 6, "", (answers[host], port))]

    monkeypatch.setattr(targets.socket, "getaddrinfo", resolver)
    url = "http://hooks.example.com:8080/hook"
    assert targets.url_refusal(url) is None  # saved: public
    delivery.webhook.url = url
    delivery.webhook.save()
    answers["hooks.example.com"] = "127.0.0.1"

    outcome = delivery_send(delivery_id=delivery.pk)

    assert outcome.status == Status.PENDING
    delivery.refresh_from_db()
    assert "internal address (127.0.0.1)" in delivery.error
    assert receiver.received == []


def test_a_receiver_that_answers_a_byte_at_a_time_is_cut_at_the_deadline(delivery, settings):
    """Each byte comes well within a read timeout; the deadline is for the whole delivery."""
    settings.WEBHOOKS_TIMEOUT_SECONDS = 2
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle():
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100:
                if stop.wait(0.5):
                    return
                connection.sendall(bytes([byte]))

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    delivery.webhook.url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    delivery.webhook.save()
    started = time.monotonic()
    try:
        outcome = delivery_send(delivery_id=delivery.pk)
    finally:
        stop.set()
        server.close()
    took = time.monotonic() - started

    assert outcome.status == Status.PENDING
    assert took < 4
    delivery.refresh_from_db()
    assert delivery.error == "No answer within 2 s: cut at the deadline"
