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
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from webhooks import targets
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


@dataclass(frozen=True)
class Target:
    """Where a delivery goes: the URL with the checked address in place of the host, the Host
    header and TLS name the receiver expects, or why it may not be posted to."""

    url: str = ""
    host_header: str = ""
    tls_name: str = ""
    refusal: str = ""


def checked_target(url: str) -> Target:
    """Resolve the URL's host now and check every address (DNS may have changed since the
    webhook was saved); the request then goes to the address checked, never to whatever a
    second lookup would say."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or targets.DEFAULT_PORTS[parts.scheme.lower()]
    addresses = targets.resolve(host, port)
    if not addresses:
        return Target(refusal=f"{host} does not resolve")
    if refusal := targets.internal_refusal(host, addresses):
        return Target(refusal=refusal)
    address = addresses[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    pinned = parts._replace(netloc=f"{literal}:{port}").geturl()
    return Target(url=pinned, host_header=parts.netloc.rpartition("@")[2], tls_name=host)


def _post(url: str, body: bytes, headers: dict[str, str]) -> Answer:
    """POST to the checked address without following redirects (a redirect could lead
    anywhere, the portal too), within ``WEBHOOKS_TIMEOUT_SECONDS`` in all: a receiver that
    answers a byte at a time is cut at the deadline, not given a fresh timeout per byte.

    Of the answer only the status is kept, never its body: a lead may point a webhook at any
    address the portal reaches, and the deliveries' page must not become a way to read what
    an internal service answers."""
    target = checked_target(url)
    if target.refusal:
        return Answer(False, None, f"Not sent: {target.refusal}"[:1000])
    deadline = settings.WEBHOOKS_TIMEOUT_SECONDS
    client = httpx.Client(timeout=deadline, follow_redirects=False)

    def send() -> int:
        with client.stream(
            "POST",
            target.url,
            content=body,
            headers={**headers, "Host": target.host_header},
            extensions={"sni_hostname": target.tls_name},
        ) as response:
            return response.status_code  # the body is never read

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhook-post")
    try:
        code = pool.submit(send).result(timeout=deadline)
    except FutureTimeout:
        client.close()  # cuts the connection the sending thread is waiting on
        return Answer(False, None, f"No answer within {deadline:g} s: cut at the deadline")
    except httpx.HTTPError as error:
        return Answer(False, None, f"{type(error).__name__}: {error}"[:1000])
    finally:
        pool.shutdown(wait=False)
        client.close()
    return _judged(code)


def _judged(code: int) -> Answer:
    if 200 <= code < 300:
        return Answer(True, code, "")
    if 300 <= code < 400:
        return Answer(False, code, f"HTTP {code}: redirects are not followed")
    return Answer(False, code, f"HTTP {code} {httpx.codes.get_reason_phrase(code)}".strip())


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
