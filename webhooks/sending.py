"""Sending a delivery: claim it, POST its signed body, record how it went, and when it failed
say when to try again (exponential backoff, a capped number of attempts, then failed).

Safe to run twice at once and after a crash: a delivery is claimed with a conditional update
(pending and due -> sending) before anything is sent, so only one sender posts it; one left
``sending`` by a worker that died is made pending again by the sweep once it is stale. A
receiver may still see a delivery twice (the worker died after it answered): the delivery id
header lets it tell.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from webhooks.models import TEST_EVENT, Delivery
from webhooks.payloads import body_bytes
from webhooks.signing import signed_headers

logger = logging.getLogger(__name__)
Status = Delivery.Status


def backoff_seconds(attempts: int, *, base: float, cap: float) -> float:
    """How long to wait after the ``attempts``-th failed attempt: base, 2 base, 4 base, ...,
    never more than ``cap``."""
    return min(cap, base * 2 ** max(attempts - 1, 0))


@dataclass(frozen=True)
class Outcome:
    """What one attempt did: the delivery's status after it, and when to try again (seconds
    from now) if it is to be retried."""

    delivery_id: int
    status: str
    retry_in: float | None = None


@dataclass(frozen=True)
class Answer:
    ok: bool
    code: int | None
    error: str


def _post(url: str, body: bytes, headers: dict[str, str]) -> Answer:
    """POST without following redirects (a redirect could lead anywhere, the portal too).

    Of the answer only the status is kept, never its body: a lead may point a webhook at any
    address the portal reaches, and the deliveries' page must not become a way to read what
    an internal service answers."""
    try:
        with (
            httpx.Client(timeout=settings.WEBHOOKS_TIMEOUT_SECONDS, follow_redirects=False) as c,
            c.stream("POST", url, content=body, headers=headers) as response,
        ):
            pass  # the body is never read
    except httpx.HTTPError as error:
        return Answer(False, None, f"{type(error).__name__}: {error}"[:1000])
    code = response.status_code
    if 200 <= code < 300:
        return Answer(True, code, "")
    if 300 <= code < 400:
        return Answer(False, code, f"HTTP {code}: redirects are not followed")
    return Answer(False, code, f"HTTP {code} {response.reason_phrase}".strip())


def delivery_send(*, delivery_id: int, now: datetime.datetime | None = None) -> Outcome | None:
    """Send the delivery if it is pending and due; None when it is not (sent by another
    sender, not due yet, or gone)."""
    now = now or timezone.now()
    claimed = Delivery.objects.filter(
        pk=delivery_id, status=Status.PENDING, next_attempt_at__lte=now
    ).update(status=Status.SENDING, attempts=F("attempts") + 1, last_attempt_at=now)
    if claimed != 1:
        return None
    delivery = Delivery.objects.select_related("webhook", "webhook__team").get(pk=delivery_id)
    webhook = delivery.webhook
    if not webhook.active and delivery.event != TEST_EVENT:
        answer = Answer(False, None, "The webhook was turned off before this was sent.")
        return _record(delivery, answer, final=True)
    body = body_bytes(delivery.payload)
    headers = signed_headers(
        secret=webhook.secret,
        body=body,
        timestamp=int(time.time()),
        event=delivery.event,
        delivery_id=delivery.pk,
        user_agent=f"{settings.PORTAL_NAME}-webhooks",
    )
    answer = _post(webhook.url, body, headers)
    if not answer.ok:
        logger.info("delivery %s to %s failed: %s", delivery.pk, webhook, answer.error)
    return _record(delivery, answer, final=delivery.attempts >= settings.WEBHOOKS_MAX_ATTEMPTS)


def _record(delivery: Delivery, answer: Answer, *, final: bool) -> Outcome:
    now = timezone.now()
    fields = {"response_code": answer.code, "error": answer.error}
    retry_in = None
    if answer.ok:
        fields.update(status=Status.SUCCEEDED, delivered_at=now, next_attempt_at=None)
    elif final:
        fields.update(status=Status.FAILED, next_attempt_at=None)
    else:
        retry_in = backoff_seconds(
            delivery.attempts,
            base=settings.WEBHOOKS_RETRY_BASE_SECONDS,
            cap=settings.WEBHOOKS_RETRY_MAX_SECONDS,
        )
        fields.update(
            status=Status.PENDING, next_attempt_at=now + datetime.timedelta(seconds=retry_in)
        )
    Delivery.objects.filter(pk=delivery.pk, status=Status.SENDING).update(**fields)
    return Outcome(delivery.pk, fields["status"], retry_in)


def deliveries_due(*, now: datetime.datetime | None = None, limit: int = 500) -> list[int]:
    """Deliveries to send now: pending and due, and those left sending by a sender that died
    (made pending again first)."""
    now = now or timezone.now()
    stale = now - datetime.timedelta(seconds=2 * settings.WEBHOOKS_TIMEOUT_SECONDS + 60)
    Delivery.objects.filter(status=Status.SENDING, last_attempt_at__lt=stale).update(
        status=Status.PENDING, next_attempt_at=now
    )
    return list(
        Delivery.objects.filter(Q(status=Status.PENDING) & Q(next_attempt_at__lte=now))
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )
