"""Webhooks end to end: a change in the portal, its delivery sent after commit by a real Celery
worker process on the real Redis broker, to a real receiver the test runs, which checks the
HMAC signature; a receiver that answers 500 first sees the delivery again after the backoff.

The worker is this module's own, on a webhooks queue of its own (``WEBHOOKS_QUEUE``, here and
in the worker, so its retries follow), with a one-second backoff (the default, 30 s, is too
long for a test)."""

import time
import uuid

import pytest
from django.conf import settings

from portal.celery import app as celery_app
from tenants import quota
from tests import factories
from tests.integration.conftest import wait_for
from tests.integration.reconcile.conftest import Worker, own_queue  # noqa: F401 (fixture)
from webhooks import services
from webhooks.models import Delivery
from webhooks.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_valid

# A worker of the module's own (not a fixture that marks the test): say what it needs.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.redis]


@pytest.fixture(scope="module")
def webhook_worker(postgres_database, tmp_path_factory):
    queue = f"webhooks-test-{uuid.uuid4().hex[:8]}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(settings, "WEBHOOKS_QUEUE", queue)  # the router reads it at each send
        worker = Worker(
            queue=queue,
            log=tmp_path_factory.mktemp("webhooks") / "worker.log",
            env={
                "WEBHOOKS_QUEUE": queue,
                "WEBHOOKS_RETRY_BASE_SECONDS": "1",
                "WEBHOOKS_ALLOWED_INTERNAL_HOSTS": "127.0.0.1",
                "WEBHOOKS_MAX_ATTEMPTS": "3",
            },
        )
        worker.wait_ready()
        yield worker
        worker.stop()
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_delete(queue)


def signed_by(secret: str, request) -> bool:
    return signature_valid(
        secret,
        timestamp=request.headers[TIMESTAMP_HEADER],
        body=request.body,
        signed=request.headers[SIGNATURE_HEADER],
        now=int(time.time()),
    )


def delivery_settled(pk: int) -> Delivery | None:
    delivery = Delivery.objects.get(pk=pk)
    return delivery if delivery.status in ("succeeded", "failed") else None


@pytest.mark.usefixtures("own_queue")  # the approval's reconcile goes where nobody reads
def test_an_approval_reaches_the_receiver_signed(
    webhook_worker, receiver, team, cluster, lead, admin
):
    webhook = factories.WebhookFactory(
        team=team, url=receiver.url, events=["quota_request.decided"]
    )
    quota_request = quota.quota_request_create(
        requested_by=lead, team=team, cluster=cluster, gpus=2, justification="Training."
    )

    quota.quota_request_approve(reviewer=admin, quota_request=quota_request)

    (got,) = receiver.wait_for(1)
    assert signed_by(webhook.secret, got)
    assert not signed_by("another secret", got)
    assert got.json["event"] == "quota_request.decided"
    assert got.json["data"]["state"] == "approved"
    assert got.json["team"]["slug"] == team.slug
    delivery = wait_for(lambda: delivery_settled(Delivery.objects.get().pk), what="delivery")
    assert delivery.status == "succeeded"
    assert delivery.attempts == 1
    assert delivery.response_code == 200


def test_a_receiver_answering_500_gets_the_delivery_again_after_the_backoff(
    webhook_worker, receiver, team, lead
):
    receiver.answers = [500, 200]
    webhook = factories.WebhookFactory(team=team, url=receiver.url, format="slack")

    delivery = services.webhook_send_test(actor=lead, webhook=webhook)

    first, second = receiver.wait_for(2)
    assert first.body == second.body
    assert all(signed_by(webhook.secret, got) for got in (first, second))
    assert "Test event for webhook" in second.json["text"]
    assert int(second.headers[TIMESTAMP_HEADER]) - int(first.headers[TIMESTAMP_HEADER]) >= 1
    settled = wait_for(lambda: delivery_settled(delivery.pk), what="delivery settled")
    assert settled.status == "succeeded"
    assert settled.attempts == 2
    assert settled.response_code == 200
    assert settled.error == ""


def test_a_receiver_that_keeps_failing_leaves_the_delivery_failed(
    webhook_worker, receiver, team, lead
):
    receiver.answers = [502]
    webhook = factories.WebhookFactory(team=team, url=receiver.url)

    delivery = services.webhook_send_test(actor=lead, webhook=webhook)

    receiver.wait_for(3)
    settled = wait_for(lambda: delivery_settled(delivery.pk), what="delivery failed")
    assert settled.status == "failed"
    assert settled.attempts == 3
    assert settled.error.startswith("HTTP 502")
    time.sleep(1.5)  # no fourth attempt
    assert len(receiver.received) == 3
