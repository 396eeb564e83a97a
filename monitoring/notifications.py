"""Telling people: a notification for each lead of a team, e-mailed after commit when mail is
set up, and marking a user's notifications read."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from monitoring.models import IdlePod, Notification
from tenants.models import Membership, Team

logger = logging.getLogger(__name__)


def email_configured() -> bool:
    """Mail goes out when a mail server is set, or a non-SMTP backend (console, locmem)."""
    backend = settings.EMAIL_BACKEND
    return bool(settings.EMAIL_HOST) or not backend.endswith("smtp.EmailBackend")


def _absolute(link: str) -> str:
    return settings.PORTAL_BASE_URL.rstrip("/") + link if link.startswith("/") else link


def notify_team_leads(
    *,
    team: Team,
    kind: str,
    subject: str,
    body: str,
    link: str = "",
    idle_pod: IdlePod | None = None,
) -> list[Notification]:
    """A notification for each lead of the team, and an e-mail after commit when mail is set
    up. Call inside the transaction that records why."""
    leads = list(
        User.objects.filter(
            memberships__team=team, memberships__role=Membership.Role.LEAD, is_active=True
        ).order_by("pk")
    )
    created = Notification.objects.bulk_create(
        [
            Notification(
                user=lead,
                team=team,
                kind=kind,
                subject=subject,
                body=body,
                link=link,
                idle_pod=idle_pod,
            )
            for lead in leads
        ]
    )
    recipients = {n.pk: lead.email for n, lead in zip(created, leads, strict=True) if lead.email}
    if recipients and email_configured():
        transaction.on_commit(
            lambda: _send_notification_mail(subject, body, link, recipients), robust=True
        )
    return created


def _send_notification_mail(subject: str, body: str, link: str, recipients: dict) -> None:
    text = f"{body}\n\n{_absolute(link)}\n" if link else f"{body}\n"
    for notification_id, address in recipients.items():
        try:
            send_mail(f"[{settings.PORTAL_NAME}] {subject}", text, None, [address])
        except Exception:  # a mail server down must not stop the idle check
            logger.exception("could not e-mail notification %s to %s", notification_id, address)
            continue
        Notification.objects.filter(pk=notification_id).update(emailed_at=timezone.now())


def notifications_mark_read(*, user: User, ids: Sequence[int] | None = None) -> int:
    """Mark the user's notifications read (all of them when ``ids`` is None)."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    return unread.update(read_at=timezone.now())
