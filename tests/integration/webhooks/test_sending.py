"""Sending a delivery to a real receiver (run by the test): the signed POST, what is recorded
of the answer, and when it is tried again. The sender runs in the test's process here;
test_worker.py sends through a Celery worker."""

import datetime
import json
import time

import pytest
from django.utils import timezone

from tests import factories
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
