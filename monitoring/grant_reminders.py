"""Reminding a team's leads that a grant ends soon, with a link to request its extension.

A grant with an end is due for a reminder once its last day is at most
``settings.PORTAL_GRANT_REMINDER_DAYS`` days away (7 unless set; one figure for every cluster).
Each grant is reminded once per end date: the reminder is recorded as an audit event
(``quota_grant.ending_reminded``, its ``after`` the grant as it was), and that record is what
tells a later run the grant was reminded already; a grant shrunk to an earlier end is reminded
again for the new date. Safe to run twice or concurrently: each grant is claimed under its row
lock and re-checked.
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from monitoring.models import Notification
from monitoring.notifications import notify_team_leads
from tenants.audit import audit, snapshot
from tenants.events import EventKind, emit
from tenants.extensions import extension_url
from tenants.models import AuditEvent, QuotaGrant

REMINDED = AuditEvent.Action.QUOTA_GRANT_ENDING_REMINDED


def _due(today: datetime.date, days: int):
    return QuotaGrant.objects.filter(
        state=QuotaGrant.State.ACTIVE,
        ends_on__gte=today,
        ends_on__lte=today + datetime.timedelta(days=days),
    )


def _reminded(grant: QuotaGrant) -> bool:
    return AuditEvent.objects.filter(
        action=REMINDED,
        target_type=QuotaGrant.__name__,
        target_id=grant.pk,
        after__ends_on=grant.ends_on.isoformat(),
    ).exists()


def grant_ending_remind(*, grant_id: int, today: datetime.date, days: int) -> bool:
    """Remind the leads of the grant's team that it ends soon, unless it is not due or was
    reminded of this end already; whether a reminder went out now."""
    with transaction.atomic():
        grant = (
            _due(today, days)
            .select_related("team", "cluster")
            .select_for_update(of=("self",))
            .filter(pk=grant_id)
            .first()
        )
        if grant is None or _reminded(grant):
            return False
        left = (grant.ends_on - today).days
        when = "today" if left == 0 else f"in {left} day{'s' if left != 1 else ''}"
        what = f"{grant.gpus} × {grant.gpu_model or grant.gpu_resource} on {grant.cluster.name}"
        link = extension_url(grant)
        leads = notify_team_leads(
            team=grant.team,
            kind=Notification.Kind.GRANT_ENDING,
            subject=f"Grant #{grant.pk} of {grant.team.slug} ends {when}",
            body=(
                f"The grant of {what} ends on {grant.ends_on.isoformat()} ({when}). To keep "
                f"the GPUs after that, request an extension: the form is filled in to continue "
                f"the grant from {(grant.ends_on + datetime.timedelta(days=1)).isoformat()}."
            ),
            link=link,
        )
        audit(
            actor=None,
            action=REMINDED,
            target=grant,
            team=grant.team,
            before=None,
            after=snapshot(grant),
            note=f"Reminded {len(leads)} lead{'s' if len(leads) != 1 else ''} that it ends on "
            f"{grant.ends_on.isoformat()}; extension: {link}",
        )
        emit(
            team_id=grant.team_id,
            kind=EventKind.GRANT_ENDING,
            title=f"Grant #{grant.pk} of {grant.team.slug} ({what}) ends {when}",
            data={
                "grant_id": grant.pk,
                "cluster": grant.cluster.name,
                "gpu_resource": grant.gpu_resource,
                "gpu_model": grant.gpu_model,
                "gpus": grant.gpus,
                "ends_on": grant.ends_on.isoformat(),
                "days_left": left,
                "extension_link": link,
            },
            link=link,
        )
    return True


def grant_ending_reminders_send(
    *, today: datetime.date | None = None, days: int | None = None
) -> list[int]:
    """Remind the leads of every grant that ends within ``days`` (the setting) of ``today``;
    returns the ids of the grants reminded now."""
    today = today or timezone.localdate()
    days = settings.PORTAL_GRANT_REMINDER_DAYS if days is None else days
    due = _due(today, days).order_by("pk").values_list("pk", flat=True)
    return [
        grant_id
        for grant_id in due
        if grant_ending_remind(grant_id=grant_id, today=today, days=days)
    ]
