"""Changes to a team's webhooks, and turning the team's events into deliveries.

Each public function checks first (who may, then every field: the URL through
``targets.check_webhook_url``) and only then writes, in one transaction with its audit event, so
a refused change leaves nothing behind. Deliveries are enqueued after commit (``sending``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError

from tenants.audit import audit
from tenants.events import Event, EventKind
from tenants.models import AuditEvent, Team
from webhooks.models import TEST_EVENT, Delivery, Webhook
from webhooks.payloads import build_payload
from webhooks.permissions import can_manage_webhooks
from webhooks.signing import new_secret
from webhooks.targets import check_webhook_url

logger = logging.getLogger(__name__)
Action = AuditEvent.Action
MAX_NAME_LENGTH = 100
# What a webhook's audit events hold of it: never the secret, and of its URL only where it goes
# (scheme and host), since a URL's path or query often carries a chat room's token and the
# team's audit trail is read by members who may not see the webhook.
AUDITED = ("team_id", "name", "format", "events", "active")


def url_shown_in_audit(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{'/…' if parts.path or parts.query else ''}"


def _snapshot(webhook: Webhook) -> dict[str, Any]:
    return {
        **{field: getattr(webhook, field) for field in AUDITED},
        "url": url_shown_in_audit(webhook.url),
    }


def check_can_manage(actor: User, team: Team) -> None:
    if not can_manage_webhooks(actor, team):
        raise PermissionDenied(f"Only leads of {team.slug} and portal admins manage its webhooks.")


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValidationError({"name": "Give the webhook a name."})
    if len(name.strip()) > MAX_NAME_LENGTH:
        raise ValidationError({"name": f"Must be at most {MAX_NAME_LENGTH} characters."})
    return name.strip()


def check_format(fmt: object) -> str:
    if fmt not in Webhook.Format.values:
        raise ValidationError({"format": f"Must be one of: {', '.join(Webhook.Format.values)}."})
    return fmt  # type: ignore[return-value]


def check_events(events: object) -> list[str]:
    if not isinstance(events, (list, tuple)) or not events:
        raise ValidationError({"events": "Choose at least one event."})
    unknown = [e for e in events if e not in EventKind.values]
    if unknown:
        raise ValidationError(
            {"events": f"Unknown event {unknown[0]!r}; one of: {', '.join(EventKind.values)}."}
        )
    return list(dict.fromkeys(events))


def check_active(active: object) -> bool:
    if not isinstance(active, bool):
        raise ValidationError({"active": "Must be true or false."})
    return active


def check_fields(
    values: dict[str, object], *, request_host: str | None, request_scheme: str
) -> dict[str, Any]:
    """Each of a webhook's fields given, checked all at once, so that one answer names every
    bad field; the URL against the host the request came to."""
    checks: dict[str, Callable[[object], Any]] = {
        "name": check_name,
        "format": check_format,
        "events": check_events,
        "active": check_active,
        "url": lambda u: check_webhook_url(
            u, request_host=request_host, request_scheme=request_scheme
        ),
    }
    unknown = sorted(set(values) - set(checks))
    if unknown:
        raise ValidationError({unknown[0]: "Not a field of a webhook that can be set."})
    errors, checked = {}, {}
    for field, value in values.items():
        try:
            checked[field] = checks[field](value)
        except ValidationError as error:
            errors.update(error.message_dict)
    if errors:
        raise ValidationError(errors)
    return checked


def _name_taken(team: Team, name: str) -> ValidationError:
    return ValidationError({"name": f"{team.slug} has a webhook named {name!r} already."})


def _check_name_free(team: Team, name: str, *, other_than: int | None = None) -> None:
    taken = Webhook.objects.filter(team=team, name=name).exclude(pk=other_than)
    if taken.exists():
        raise _name_taken(team, name)


def webhook_create(
    *,
    actor: User,
    team: Team,
    name: object,
    url: object,
    events: object,
    format: object = Webhook.Format.GENERIC,
    active: object = True,
    request_host: str | None = None,
    request_scheme: str = "http",
) -> Webhook:
    """A new webhook of the team, with a fresh secret (the caller shows it once)."""
    check_can_manage(actor, team)
    checked = check_fields(
        {"name": name, "url": url, "events": events, "format": format, "active": active},
        request_host=request_host,
        request_scheme=request_scheme,
    )
    webhook = Webhook(team=team, secret=new_secret(), **checked)
    try:
        with transaction.atomic():
            _check_name_free(team, webhook.name)
            webhook.save()
            audit(
                actor=actor,
                action=Action.WEBHOOK_CREATED,
                target=webhook,
                team=team,
                before=None,
                after=_snapshot(webhook),
            )
    except IntegrityError as error:  # another lead made one of that name just now
        raise _name_taken(team, webhook.name) from error
    return webhook


def webhook_update(
    *,
    actor: User,
    webhook: Webhook,
    request_host: str | None = None,
    request_scheme: str = "http",
    **changes: object,
) -> Webhook:
    """Change any of the webhook's ``name``, ``url``, ``format``, ``events``, ``active``."""
    check_can_manage(actor, webhook.team)
    checked = check_fields(changes, request_host=request_host, request_scheme=request_scheme)
    try:
        with transaction.atomic():
            locked = Webhook.objects.select_for_update().select_related("team").get(pk=webhook.pk)
            before = _snapshot(locked)
            for field, value in checked.items():
                setattr(locked, field, value)
            if _snapshot(locked) == before:
                return locked
            if locked.name != before["name"]:
                _check_name_free(locked.team, locked.name, other_than=locked.pk)
            locked.save()
            audit(
                actor=actor,
                action=Action.WEBHOOK_UPDATED,
                target=locked,
                team=locked.team,
                before=before,
                after=_snapshot(locked),
            )
    except IntegrityError as error:
        raise _name_taken(webhook.team, str(checked.get("name"))) from error
    return locked


def webhook_rotate_secret(*, actor: User, webhook: Webhook) -> Webhook:
    """A new secret for the webhook (the old one stops signing at once)."""
    check_can_manage(actor, webhook.team)
    with transaction.atomic():
        locked = Webhook.objects.select_for_update().select_related("team").get(pk=webhook.pk)
        locked.secret = new_secret()
        locked.save(update_fields=["secret", "updated_at"])
        audit(
            actor=actor,
            action=Action.WEBHOOK_UPDATED,
            target=locked,
            team=locked.team,
            before=_snapshot(locked),
            after=_snapshot(locked),
            note="Signing secret rotated.",
        )
    return locked


def webhook_delete(*, actor: User, webhook: Webhook) -> None:
    """Delete the webhook and its deliveries."""
    check_can_manage(actor, webhook.team)
    with transaction.atomic():
        audit(
            actor=actor,
            action=Action.WEBHOOK_DELETED,
            target=webhook,
            team=webhook.team,
            before=_snapshot(webhook),
            after=None,
        )
        webhook.delete()


# --- deliveries --------------------------------------------------------------------------------


def _payload(webhook: Webhook, event: Event, team: Team) -> dict[str, Any]:
    link = settings.PORTAL_BASE_URL.rstrip("/") + event.link if event.link.startswith("/") else ""
    return build_payload(
        webhook.format,
        portal_name=settings.PORTAL_NAME,
        kind=event.kind,
        team_slug=team.slug,
        team_name=team.name,
        title=event.title,
        data=event.data,
        link=link or event.link,
        occurred_at=event.occurred_at,
    )


def _enqueue_after_commit(delivery_ids: list[int]) -> None:
    if delivery_ids:
        transaction.on_commit(lambda: send_now(delivery_ids))


def send_now(delivery_ids: list[int]) -> None:
    """Enqueue the deliveries; a broker that is down is logged, and the sweep sends them."""
    deliver = current_app.tasks["webhooks.tasks.deliver"]
    for delivery_id in delivery_ids:
        try:
            deliver.delay(delivery_id=delivery_id)
        except OperationalError:
            logger.exception("Could not enqueue delivery %s; the sweep will send it", delivery_id)
            return


def deliveries_create(*, event: Event) -> list[Delivery]:
    """A delivery of the event to each active webhook of its team that wants it, sent after
    commit. Runs inside the transaction that recorded the event."""
    webhooks = [
        w
        for w in Webhook.objects.filter(team_id=event.team_id, active=True)
        .select_related("team")
        .order_by("pk")
        if w.wants(event.kind)
    ]
    now = timezone.now()
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(
                webhook=w,
                event=event.kind,
                payload=_payload(w, event, w.team),
                next_attempt_at=now,
            )
            for w in webhooks
        ]
    )
    _enqueue_after_commit([d.pk for d in deliveries])
    return deliveries


def on_event_emitted(sender, *, event: Event, **kwargs) -> None:
    """``tenants.events.event_emitted``'s receiver (connected in ``WebhooksConfig``): its writes
    in a savepoint, so that failing here never undoes the change that emitted the event."""
    with transaction.atomic():
        deliveries_create(event=event)


def webhook_send_test(*, actor: User, webhook: Webhook) -> Delivery:
    """Send the webhook a test event now (whether or not it is active)."""
    check_can_manage(actor, webhook.team)
    event = Event(
        kind=TEST_EVENT,
        team_id=webhook.team_id,
        title=f"Test event for webhook {webhook.name} of {webhook.team.slug}",
        data={"webhook": webhook.name, "sent_by": actor.get_username()},
        link=reverse("team-webhooks", args=[webhook.team.slug]),
    )
    with transaction.atomic():
        delivery = Delivery.objects.create(
            webhook=webhook,
            event=TEST_EVENT,
            payload=_payload(webhook, event, webhook.team),
            next_attempt_at=timezone.now(),
        )
        _enqueue_after_commit([delivery.pk])
    return delivery


def delivery_redeliver(*, actor: User, delivery: Delivery) -> Delivery:
    """Send a delivery's body again, as a new delivery (the old one keeps its history)."""
    check_can_manage(actor, delivery.webhook.team)
    with transaction.atomic():
        again = Delivery.objects.create(
            webhook=delivery.webhook,
            event=delivery.event,
            payload=delivery.payload,
            next_attempt_at=timezone.now(),
        )
        _enqueue_after_commit([again.pk])
    return again
