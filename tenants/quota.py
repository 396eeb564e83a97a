"""Changes to quota: requests (create, cancel, reject, approve) and grants (revoke, shrink,
expire). Views, serializers and tasks call these and nothing else.

As in ``tenants.services``: each function validates first (``quota_checks``) and only then
writes, inside one transaction, with an audit event per state change; whenever what a team holds
on a cluster changes, ``reconcile_triggers.request_reconcile_after_commit`` brings the cluster in
line after commit.
"""

import datetime
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from tenants.audit import audit, snapshot
from tenants.errors import InvalidTransition
from tenants.events import EventKind, emit
from tenants.models import AuditEvent, Membership, QuotaGrant, QuotaRequest, Team
from tenants.permissions import can_request_quota, is_portal_admin, team_role
from tenants.quota_checks import (
    check_can_decide,
    check_capacity,
    check_new_quota_request,
    check_transition,
    narrowing_errors,
)
from tenants.reconcile_triggers import request_reconcile_after_commit

Action = AuditEvent.Action
RequestState = QuotaRequest.State
GrantState = QuotaGrant.State


def lock_cluster(cluster_id: int) -> Cluster:
    # Lock the cluster row: two admins approving at once must not both see the same free capacity.
    return Cluster.objects.select_for_update().get(pk=cluster_id)


# --- quota requests ----------------------------------------------------------------------------


def quota_request_create(
    *,
    requested_by: User,
    team: Team,
    cluster: Cluster,
    gpus: int,
    justification: str,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
    starts_on: datetime.date | None = None,
    ends_on: datetime.date | None = None,
    cpu_cores: Decimal | None = None,
    memory_gib: int | None = None,
    gpu_model: str = "",
) -> QuotaRequest:
    """A lead asks for GPUs of a kind on a cluster, of one GPU model (``gpu_model``, as the
    cluster's nodes name it) or of any model (empty)."""
    if not can_request_quota(requested_by, team):
        raise PermissionDenied(f"Only leads of {team.slug} can request quota for it.")
    today = timezone.localdate()
    starts_on = starts_on or today
    check_new_quota_request(
        team=team,
        cluster=cluster,
        gpu_resource=gpu_resource,
        gpus=gpus,
        starts_on=starts_on,
        ends_on=ends_on,
        cpu_cores=cpu_cores,
        memory_gib=memory_gib,
        justification=justification,
        today=today,
        gpu_model=gpu_model,
    )
    with transaction.atomic():
        quota_request = QuotaRequest.objects.create(
            team=team,
            cluster=cluster,
            gpu_resource=gpu_resource,
            gpu_model=gpu_model,
            gpus=gpus,
            cpu_cores=cpu_cores,
            memory_gib=memory_gib,
            starts_on=starts_on,
            ends_on=ends_on,
            justification=justification.strip(),
            requested_by=requested_by,
        )
        audit(
            actor=requested_by,
            action=Action.QUOTA_REQUEST_CREATED,
            target=quota_request,
            team=team,
            before=None,
            after=snapshot(quota_request),
        )
    return quota_request


def quota_request_cancel(*, actor: User, quota_request: QuotaRequest) -> QuotaRequest:
    """The requester (or a lead of the team) withdraws a pending request."""
    is_requester = quota_request.requested_by_id == actor.pk
    if not is_requester and team_role(actor, quota_request.team) != Membership.Role.LEAD:
        raise PermissionDenied("Only the requester or a lead of the team can cancel a request.")
    with transaction.atomic():
        locked = QuotaRequest.objects.select_for_update().get(pk=quota_request.pk)
        check_transition(locked, RequestState.CANCELLED)
        before = snapshot(locked)
        locked.state = RequestState.CANCELLED
        locked.decided_at = timezone.now()
        locked.save(update_fields=["state", "decided_at"])
        audit(
            actor=actor,
            action=Action.QUOTA_REQUEST_CANCELLED,
            target=locked,
            team=locked.team,
            before=before,
            after=snapshot(locked),
        )
    return locked


def _record_decision(
    locked: QuotaRequest, state: str, *, reviewer: User, note: str, action: str
) -> None:
    """Write a reviewer's decision on the locked request and audit it (inside the caller's
    transaction)."""
    before = snapshot(locked)
    locked.state = state
    locked.decided_by = reviewer
    locked.decided_at = timezone.now()
    locked.decision_note = note.strip()
    locked.save(update_fields=["state", "decided_by", "decided_at", "decision_note"])
    audit(
        actor=reviewer,
        action=action,
        target=locked,
        team=locked.team,
        before=before,
        after=snapshot(locked),
        note=locked.decision_note,
    )


def _emit_decision(locked: QuotaRequest, *, grant: QuotaGrant | None = None) -> None:
    """Tell the team's listeners (webhooks) how its request was decided (inside the
    decision's transaction)."""
    what = f"{locked.gpus} × {locked.gpu_model or locked.gpu_resource} on {locked.cluster.name}"
    title = f"Quota request #{locked.pk} of {locked.team.slug} ({what}) was {locked.state}"
    if grant is not None and grant.gpus != locked.gpus:
        title += f" for {grant.gpus} GPUs"
    ends_on = grant.ends_on if grant is not None else locked.ends_on
    emit(
        team_id=locked.team_id,
        kind=EventKind.QUOTA_REQUEST_DECIDED,
        title=title,
        data={
            # What a chat message shows first (Slack's blocks show ten facts).
            "request_id": locked.pk,
            "state": locked.state,
            "note": locked.decision_note,
            "decided_by": locked.decided_by.get_username() if locked.decided_by else "",
            "cluster": locked.cluster.name,
            "gpus_requested": locked.gpus,
            "gpus_granted": grant.gpus if grant is not None else 0,
            "gpu_resource": locked.gpu_resource,
            "gpu_model": locked.gpu_model,
            "starts_on": locked.starts_on.isoformat(),
            "ends_on": ends_on.isoformat() if ends_on else None,
            "grant_id": grant.pk if grant is not None else None,
        },
        link=reverse("team-detail", args=[locked.team.slug]),
    )


def quota_request_reject(*, reviewer: User, quota_request: QuotaRequest, note: str) -> QuotaRequest:
    check_can_decide(reviewer=reviewer, quota_request=quota_request)
    if not note.strip():
        raise ValidationError({"note": "Tell the team why the request is rejected."})
    with transaction.atomic():
        locked = QuotaRequest.objects.select_for_update().get(pk=quota_request.pk)
        check_transition(locked, RequestState.REJECTED)
        _record_decision(
            locked,
            RequestState.REJECTED,
            reviewer=reviewer,
            note=note,
            action=Action.QUOTA_REQUEST_REJECTED,
        )
        _emit_decision(locked)
    return locked


def quota_request_approve(
    *,
    reviewer: User,
    quota_request: QuotaRequest,
    gpus: int | None = None,
    ends_on: datetime.date | None = None,
    note: str = "",
) -> QuotaGrant:
    """Approve the request, optionally for fewer GPUs or a shorter period, and grant it.

    Capacity is checked and the grant written under the cluster's row lock, so concurrent
    approvals are serialised and can never over-allocate.
    """
    # Refused up front when the reviewer may not decide at all; a department admin approving
    # fewer GPUs or a shorter period is judged on those (checked as fields below).
    whole = isinstance(gpus, int) and not isinstance(gpus, bool) and 1 <= gpus <= quota_request.gpus
    check_can_decide(
        reviewer=reviewer,
        quota_request=quota_request,
        gpus=gpus if whole else None,
        ends_on=ends_on,
    )
    with transaction.atomic():
        cluster = lock_cluster(quota_request.cluster_id)
        locked = QuotaRequest.objects.select_for_update().get(pk=quota_request.pk)
        check_transition(locked, RequestState.APPROVED)
        granted = locked.gpus if gpus is None else gpus
        granted_until = locked.ends_on if ends_on is None else ends_on
        errors = narrowing_errors(
            locked,
            gpus=gpus,
            ends_on=ends_on,
            whole="Must be a whole number of GPUs, at least 1.",
            most="Can approve at most the {gpus} GPUs requested.",
            latest="Can only shorten the requested period (it ends {ends_on}).",
        )
        if granted_until is not None and granted_until < timezone.localdate():
            errors.setdefault(
                "ends_on", f"The period ended on {granted_until.isoformat()}; nothing to grant."
            )
        if errors:
            raise ValidationError(errors)
        if not is_portal_admin(reviewer):
            # A department admin: the ceilings again, under the cluster's lock, with what is
            # granted.
            check_can_decide(
                reviewer=reviewer, quota_request=locked, gpus=granted, ends_on=granted_until
            )
        check_capacity(
            cluster=cluster,
            gpu_resource=locked.gpu_resource,
            gpu_model=locked.gpu_model,
            gpus=granted,
            starts_on=locked.starts_on,
            ends_on=granted_until,
        )

        _record_decision(
            locked,
            RequestState.APPROVED,
            reviewer=reviewer,
            note=note,
            action=Action.QUOTA_REQUEST_APPROVED,
        )
        locked.cluster = cluster
        grant = grant_approved_request(
            locked,
            gpus=granted,
            ends_on=granted_until,
            granted_by=reviewer,
            actor=reviewer,
            note=locked.decision_note,
        )
        _emit_decision(locked, grant=grant)
        request_reconcile_after_commit(team_id=grant.team_id, cluster_id=grant.cluster_id)
    return grant


def grant_approved_request(
    quota_request: QuotaRequest,
    *,
    gpus: int,
    ends_on: datetime.date | None,
    granted_by: User,
    actor: User | None,
    note: str,
) -> QuotaGrant:
    """The grant of an approved request, for ``gpus`` until ``ends_on``, and its audit event:
    what an approval writes, and a sharing layout's grant of slices (``sharing.grants``)."""
    grant = QuotaGrant.objects.create(
        request=quota_request,
        team=quota_request.team,
        cluster=quota_request.cluster,
        gpu_resource=quota_request.gpu_resource,
        gpu_model=quota_request.gpu_model,
        gpus=gpus,
        cpu_cores=quota_request.cpu_cores,
        memory_gib=quota_request.memory_gib,
        starts_on=quota_request.starts_on,
        ends_on=ends_on,
        granted_by=granted_by,
    )
    audit(
        actor=actor,
        action=Action.QUOTA_GRANT_ACTIVATED,
        target=grant,
        team=grant.team,
        before=None,
        after=snapshot(grant),
        note=note,
    )
    return grant


@dataclass(frozen=True)
class Decision:
    """What became of one request of a bulk decision: ``error`` None when it was decided,
    else why not, in words."""

    quota_request: QuotaRequest
    error: str | None = None


def quota_requests_decide(
    *, reviewer: User, quota_requests: list[QuotaRequest], approve: bool, note: str = ""
) -> list[Decision]:
    """Approve (in full) or reject each request, in the order given, each through
    ``quota_request_approve`` or ``quota_request_reject`` in a transaction of its own: the same
    checks as one decision (capacity under the cluster's lock, the reviewer's rights, the
    request's state), and one refused leaves the others decided. Give the queue's order (oldest
    first) so that capacity goes to the oldest."""
    decisions = []
    for quota_request in quota_requests:
        try:
            if approve:
                quota_request_approve(reviewer=reviewer, quota_request=quota_request, note=note)
            else:
                quota_request_reject(reviewer=reviewer, quota_request=quota_request, note=note)
        except ValidationError as error:
            decisions.append(Decision(quota_request, " ".join(error.messages)))
        except (PermissionDenied, InvalidTransition) as error:
            decisions.append(Decision(quota_request, str(error)))
        else:
            decisions.append(Decision(quota_request))
    return decisions


# --- quota grants ------------------------------------------------------------------------------


def end_grant(*, grant_id: int, to_state: str, actor: User | None, note: str) -> QuotaGrant:
    """End an active grant (revoked or expired) with its audit event, and bring its cluster in
    line after commit. Callers decide who may; ``team_archive`` ends every grant of a team."""
    with transaction.atomic():
        locked = QuotaGrant.objects.select_for_update().get(pk=grant_id)
        check_transition(locked, to_state)
        before = snapshot(locked)
        locked.state = to_state
        locked.ended_at = timezone.now()
        locked.save(update_fields=["state", "ended_at", "updated_at"])
        action = (
            Action.QUOTA_GRANT_REVOKED
            if to_state == GrantState.REVOKED
            else Action.QUOTA_GRANT_EXPIRED
        )
        audit(
            actor=actor,
            action=action,
            target=locked,
            team=locked.team,
            before=before,
            after=snapshot(locked),
            note=note,
        )
        request_reconcile_after_commit(team_id=locked.team_id, cluster_id=locked.cluster_id)
    return locked


def quota_grant_revoke(*, actor: User, grant: QuotaGrant, note: str = "") -> QuotaGrant:
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can revoke grants.")
    return end_grant(grant_id=grant.pk, to_state=GrantState.REVOKED, actor=actor, note=note.strip())


def quota_grant_shrink(
    *,
    actor: User,
    grant: QuotaGrant,
    gpus: int | None = None,
    ends_on: datetime.date | None = None,
    note: str = "",
) -> QuotaGrant:
    """Reduce an active grant's GPUs or end it sooner. Growing a grant needs a new request."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can shrink grants.")
    with transaction.atomic():
        locked = QuotaGrant.objects.select_for_update().get(pk=grant.pk)
        check_transition(locked, GrantState.ACTIVE)
        errors = narrowing_errors(
            locked,
            gpus=gpus,
            ends_on=ends_on,
            whole="Must be a whole number of GPUs, at least 1 (revoke to end it).",
            most="Can only shrink: the grant has {gpus} GPUs. Ask for more with a new request.",
            latest="Can only end sooner: the grant ends {ends_on}.",
        )
        if not errors and (gpus in (None, locked.gpus)) and (ends_on in (None, locked.ends_on)):
            errors["non_field_errors"] = "Nothing to change: give fewer GPUs or an earlier end."
        if errors:
            raise ValidationError(errors)
        before = snapshot(locked)
        if gpus is not None:
            locked.gpus = gpus
        if ends_on is not None:
            locked.ends_on = ends_on
        locked.save(update_fields=["gpus", "ends_on", "updated_at"])
        audit(
            actor=actor,
            action=Action.QUOTA_GRANT_SHRUNK,
            target=locked,
            team=locked.team,
            before=before,
            after=snapshot(locked),
            note=note.strip(),
        )
        request_reconcile_after_commit(team_id=locked.team_id, cluster_id=locked.cluster_id)
    return locked


def quota_grants_expire(*, today: datetime.date | None = None) -> list[int]:
    """End every active grant whose last day has passed; returns the ids that expired now.

    Safe to run concurrently: each grant is claimed under its row lock and re-checked.
    """
    today = today or timezone.localdate()
    due = QuotaGrant.objects.filter(state=GrantState.ACTIVE, ends_on__lt=today)
    expired = []
    for grant_id in due.order_by("pk").values_list("pk", flat=True):
        try:
            end_grant(
                grant_id=grant_id,
                to_state=GrantState.EXPIRED,
                actor=None,
                note=f"Period ended before {today.isoformat()}.",
            )
        except InvalidTransition:
            continue  # another worker ended it first
        expired.append(grant_id)
    return expired
