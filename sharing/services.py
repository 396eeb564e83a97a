"""Changes to layout requests by people: a lead asks (``layout_create``) or withdraws
(``layout_cancel``), a portal admin rejects (``layout_reject``) or approves (``layout_approve``,
which enqueues ``tasks.apply_layout`` once committed). What the cluster then does is
``sharing.applying`` and ``sharing.reverting``, run by the tasks.

Each function validates first (``checks``) and then writes, in one transaction, with an audit
event per state change (``tenants.audit``)."""

import datetime
import logging
from typing import Any

from celery import current_app
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from sharing.checks import check_new_layout, check_transition, converting_elsewhere
from sharing.layouts import LayoutShape
from sharing.models import LayoutRequest
from sharing.permissions import can_decide_layouts, can_request_layout
from tenants.audit import audit
from tenants.events import EventKind, emit
from tenants.models import AuditEvent, Membership, QuotaGrant, Team
from tenants.permissions import team_role

logger = logging.getLogger(__name__)

Action = AuditEvent.Action
State = LayoutRequest.State

# What an audit event records of a layout, before and after.
AUDITED = [
    "team_id",
    "cluster_id",
    "source_grant_id",
    "gpu_model",
    "gpus",
    "kind",
    "mig_profile",
    "replicas",
    "slices",
    "ends_on",
    "state",
    "nodes",
    "error",
    "decision_note",
    "slice_grant_id",
    "returned_grant_id",
]


def layout_snapshot(layout: LayoutRequest) -> dict[str, Any]:
    values = {field: getattr(layout, field) for field in AUDITED}
    return {
        key: value.isoformat() if isinstance(value, datetime.date) else value
        for key, value in values.items()
    }


# The changes the team's webhooks hear of: every one after the lead's own request.
TOLD_ACTIONS = frozenset(
    {
        AuditEvent.Action.LAYOUT_REJECTED,
        AuditEvent.Action.LAYOUT_APPROVED,
        AuditEvent.Action.LAYOUT_APPLIED,
        AuditEvent.Action.LAYOUT_FAILED,
        AuditEvent.Action.LAYOUT_REVERTED,
    }
)


def audit_layout(
    layout: LayoutRequest, *, actor: User | None, action: str, before: dict | None, note: str = ""
) -> None:
    """Record a change of the layout in the audit trail and, from its decision on, tell the
    team's webhooks (``sharing_layout.changed``): inside the change's transaction."""
    audit(
        actor=actor,
        action=action,
        target=layout,
        team=layout.team,
        before=before,
        after=layout_snapshot(layout),
        note=note,
    )
    if action in TOLD_ACTIONS:
        emit(
            team_id=layout.team_id,
            kind=EventKind.SHARING_LAYOUT_CHANGED,
            title=(
                f"Sharing layout #{layout.pk} ({layout.gpus} × {layout.gpu_model} as "
                f"{layout.describe}) {layout.get_state_display().lower()}"
                + (f": {note}" if note else "")
            ),
            data={
                "layout_id": layout.pk,
                "state": layout.state,
                "nodes": list(layout.nodes or []),
                "error": layout.error,
            },
            link=f"/sharing/teams/{layout.team.slug}/",
        )


def send_task(name: str, *, layout_id: int, countdown: float | None = None) -> None:
    """Send a sharing task by name; a broker that is down is logged (the periodic check sends
    it again), never a failed change."""
    try:
        current_app.tasks[f"sharing.tasks.{name}"].apply_async(
            kwargs={"layout_id": layout_id}, countdown=countdown
        )
    except OperationalError:
        logger.exception("Could not enqueue %s of sharing layout %s", name, layout_id)


def layout_create(
    *,
    requested_by: User,
    team: Team,
    source_grant: QuotaGrant,
    gpus: int,
    kind: str,
    ends_on: datetime.date | None,
    justification: str,
    mig_profile: str = "",
    replicas: int | None = None,
) -> LayoutRequest:
    """A lead asks to turn ``gpus`` whole GPUs of one of the team's grants into slices."""
    if not can_request_layout(requested_by, team):
        raise PermissionDenied(f"Only leads of {team.slug} can ask for a sharing layout.")
    today = timezone.localdate()
    check_new_layout(
        team=team,
        source_grant=source_grant,
        gpus=gpus,
        kind=kind,
        mig_profile=mig_profile,
        replicas=replicas,
        ends_on=ends_on,
        justification=justification,
        today=today,
    )
    shape = LayoutShape(
        kind=kind,
        gpu_model=source_grant.gpu_model,
        gpus=gpus,
        mig_profile=mig_profile,
        replicas=replicas,
    )
    with transaction.atomic():
        layout = LayoutRequest.objects.create(
            team=team,
            cluster_id=source_grant.cluster_id,
            source_grant=source_grant,
            gpu_model=source_grant.gpu_model,
            gpus=gpus,
            kind=kind,
            mig_profile=mig_profile,
            replicas=replicas,
            slices=shape.slices,
            ends_on=ends_on,
            justification=justification.strip(),
            requested_by=requested_by,
        )
        audit_layout(layout, actor=requested_by, action=Action.LAYOUT_REQUESTED, before=None)
    return layout


def _locked(layout: LayoutRequest) -> LayoutRequest:
    return LayoutRequest.objects.select_for_update().select_related("team").get(pk=layout.pk)


def layout_cancel(*, actor: User, layout: LayoutRequest) -> LayoutRequest:
    """The requester (or a lead of the team) withdraws a pending layout request."""
    is_requester = layout.requested_by_id == actor.pk
    if not is_requester and team_role(actor, layout.team) != Membership.Role.LEAD:
        raise PermissionDenied("Only the requester or a lead of the team can cancel a layout.")
    with transaction.atomic():
        locked = _locked(layout)
        check_transition(locked, State.CANCELLED)
        before = layout_snapshot(locked)
        locked.state = State.CANCELLED
        locked.decided_at = timezone.now()
        locked.save(update_fields=["state", "decided_at", "updated_at"])
        audit_layout(locked, actor=actor, action=Action.LAYOUT_CANCELLED, before=before)
    return locked


def _check_can_decide(reviewer: User, layout: LayoutRequest) -> None:
    if not can_decide_layouts(reviewer):
        raise PermissionDenied("Only portal admins can approve or reject sharing layouts.")
    if layout.requested_by_id == reviewer.pk:
        raise PermissionDenied("You cannot decide on a sharing layout you asked for yourself.")


def _decide(locked: LayoutRequest, state: str, *, reviewer: User, note: str, action: str) -> None:
    before = layout_snapshot(locked)
    locked.state = state
    locked.decided_by = reviewer
    locked.decided_at = timezone.now()
    locked.decision_note = note.strip()
    locked.save(update_fields=["state", "decided_by", "decided_at", "decision_note", "updated_at"])
    audit_layout(locked, actor=reviewer, action=action, before=before, note=locked.decision_note)


def layout_reject(*, reviewer: User, layout: LayoutRequest, note: str) -> LayoutRequest:
    _check_can_decide(reviewer, layout)
    if not note.strip():
        raise ValidationError({"note": "Tell the team why the layout is rejected."})
    with transaction.atomic():
        locked = _locked(layout)
        check_transition(locked, State.REJECTED)
        _decide(locked, State.REJECTED, reviewer=reviewer, note=note, action=Action.LAYOUT_REJECTED)
    return locked


def layout_approve(*, reviewer: User, layout: LayoutRequest, note: str = "") -> LayoutRequest:
    """Approve the layout: once committed, ``tasks.apply_layout`` picks the nodes and changes
    them. The source grant must still hold the GPUs (it may have been shrunk or ended since the
    request)."""
    _check_can_decide(reviewer, layout)
    with transaction.atomic():
        locked = _locked(layout)
        check_transition(locked, State.APPROVED)
        grant = QuotaGrant.objects.select_for_update().get(pk=locked.source_grant_id)
        if grant.state != QuotaGrant.State.ACTIVE:
            raise ValidationError(
                {"source_grant": f"Grant #{grant.pk} is {grant.state}: nothing to convert."}
            )
        free = grant.gpus - converting_elsewhere(grant, exclude=locked.pk)
        if locked.gpus > free:
            raise ValidationError(
                {
                    "gpus": f"Grant #{grant.pk} holds {max(free, 0)} GPUs not asked for by other "
                    f"layouts now; this layout converts {locked.gpus}."
                }
            )
        if locked.ends_on < timezone.localdate():
            raise ValidationError(
                {"ends_on": f"The layout ended on {locked.ends_on.isoformat()}; nothing to apply."}
            )
        _decide(locked, State.APPROVED, reviewer=reviewer, note=note, action=Action.LAYOUT_APPROVED)
        locked.progress = "Approved; waiting for a worker to pick the nodes."
        locked.save(update_fields=["progress", "updated_at"])
        layout_id = locked.pk
        transaction.on_commit(lambda: send_task("apply_layout", layout_id=layout_id))
    return locked
