"""Grants booked ahead take effect on their first day.

A grant approved before its first day is written at once (and counts against capacity from its
first day to its last), but no reconcile pass puts it in the team's ResourceQuota (or, in Kueue
mode, its ClusterQueue) until that day: passes count the grants in effect on the day they run
(``manifests.in_effect``). ``quota_grants_start`` is the daily step that notices the first day
has come: it records it (``quota_grant.started``, once per grant) and marks the team's state on
the cluster as behind; the periodic sweep that calls it then passes over those teams with the
same ``today``, which brings the quota to the cluster.
"""

import datetime

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from tenants.audit import audit, snapshot
from tenants.models import AuditEvent, QuotaGrant
from tenants.reconcile_triggers import mark_reconcile_requested

Action = AuditEvent.Action


def grants_starting(today: datetime.date):
    """Active grants approved before their first day, in effect ``today``, whose start has not
    been recorded yet."""
    recorded = AuditEvent.objects.filter(
        action=Action.QUOTA_GRANT_STARTED,
        target_type=QuotaGrant.__name__,
        target_id=OuterRef("pk"),
    )
    return (
        QuotaGrant.objects.filter(state=QuotaGrant.State.ACTIVE, starts_on__lte=today)
        .filter(Q(ends_on__isnull=True) | Q(ends_on__gte=today))
        .filter(created_at__date__lt=F("starts_on"))
        .exclude(Exists(recorded))
    )


def quota_grants_start(*, today: datetime.date | None = None) -> list[int]:
    """Record the first day of every grant booked ahead whose first day has come (by ``today``,
    default the local date), and mark its team's state on the cluster as behind; returns the ids
    recorded now. The caller's sweep passes over those teams (nothing is enqueued here: a pass
    with another clock must not undo it).

    Safe to run concurrently and again: each grant is locked and re-checked before its event
    is written, so a start is recorded once.
    """
    today = today or timezone.localdate()
    started = []
    for grant_id in grants_starting(today).order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            locked = grants_starting(today).select_for_update(of=("self",)).filter(pk=grant_id)
            grant = locked.select_related("team").first()
            if grant is None:
                continue  # another sweep recorded it, or it ended meanwhile
            audit(
                actor=None,
                action=Action.QUOTA_GRANT_STARTED,
                target=grant,
                team=grant.team,
                before=snapshot(grant),
                after=snapshot(grant),
                note=f"First day {grant.starts_on.isoformat()}: its quota goes to the cluster.",
            )
            mark_reconcile_requested(team_id=grant.team_id, cluster_id=grant.cluster_id)
        started.append(grant_id)
    return started
