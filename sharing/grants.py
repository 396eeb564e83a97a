"""How a layout changes the team's grants, inside the transaction that records the change on
the cluster (``LayoutRequest``'s docstring says the rule): ``convert`` when the nodes offer the
slices, ``give_back`` when they offer whole GPUs again. Each writes its audit events and asks
for the team's reconcile after commit; the caller holds the layout's row lock."""

import contextlib
import datetime

from django.contrib.auth.models import User
from django.utils import timezone

from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from sharing.layouts import slice_model
from sharing.models import LayoutRequest
from tenants.audit import audit, snapshot
from tenants.errors import InvalidTransition
from tenants.models import AuditEvent, QuotaGrant, QuotaRequest
from tenants.quota import end_grant, grant_approved_request
from tenants.reconcile_triggers import request_reconcile_after_commit

Action = AuditEvent.Action
GrantState = QuotaGrant.State


def _auto_grant(
    layout: LayoutRequest,
    *,
    gpu_resource: str,
    gpu_model: str,
    gpus: int,
    ends_on: datetime.date | None,
    justification: str,
    reviewer: User | None,
) -> QuotaGrant:
    """A request approved at once, and its grant (``grant_approved_request``, as an approval
    writes it, without the capacity check: the GPUs are the layout's own, changed in kind)."""
    granted_by = reviewer or layout.decided_by or layout.requested_by
    today = timezone.localdate()
    quota_request = QuotaRequest.objects.create(
        team=layout.team,
        cluster_id=layout.cluster_id,
        gpu_resource=gpu_resource,
        gpu_model=gpu_model,
        gpus=gpus,
        starts_on=today,
        ends_on=ends_on,
        justification=justification,
        requested_by=layout.requested_by,
        state=QuotaRequest.State.APPROVED,
        decided_by=granted_by,
        decided_at=timezone.now(),
        decision_note=f"Approved with sharing layout #{layout.pk}.",
    )
    audit(
        actor=reviewer,
        action=Action.QUOTA_REQUEST_APPROVED,
        target=quota_request,
        team=layout.team,
        before=None,
        after=snapshot(quota_request),
        note=justification,
    )
    return grant_approved_request(
        quota_request,
        gpus=gpus,
        ends_on=ends_on,
        granted_by=granted_by,
        actor=reviewer,
        note=justification,
    )


def convert(layout: LayoutRequest) -> str | None:
    """The source grant gives up the layout's GPUs (shrunk, or ended when they are all of it)
    and a grant of the slices is made. Returns why not, in words, when the source grant no
    longer holds them (an admin shrank or revoked it meanwhile); then nothing is written."""
    source = QuotaGrant.objects.select_for_update().get(pk=layout.source_grant_id)
    if source.state != GrantState.ACTIVE or source.gpus < layout.gpus:
        return (
            f"Grant #{source.pk} no longer holds {layout.gpus} GPUs to convert (it is "
            f"{source.state}, {source.gpus} GPUs)."
        )
    note = f"{layout.gpus} GPUs converted by sharing layout #{layout.pk}."
    before = snapshot(source)
    if source.gpus == layout.gpus:
        source.state = GrantState.REVOKED
        source.ended_at = timezone.now()
        source.save(update_fields=["state", "ended_at", "updated_at"])
        action = Action.QUOTA_GRANT_REVOKED
        layout.source_ended = True
    else:
        source.gpus -= layout.gpus
        source.save(update_fields=["gpus", "updated_at"])
        action = Action.QUOTA_GRANT_SHRUNK
    audit(
        actor=None,
        action=action,
        target=source,
        team=layout.team,
        before=before,
        after=snapshot(source),
        note=note,
    )
    layout.slice_grant = _auto_grant(
        layout,
        gpu_resource=layout.slice_resource,
        gpu_model=slice_model(layout.kind, layout.gpu_model),
        gpus=layout.slices,
        ends_on=layout.ends_on,
        justification=(
            f"Sharing layout #{layout.pk}: {layout.gpus} × {layout.gpu_model} as "
            f"{layout.describe}. {layout.justification}"
        ),
        reviewer=layout.decided_by,
    )
    request_reconcile_after_commit(team_id=layout.team_id, cluster_id=layout.cluster_id)
    return None


def give_back(layout: LayoutRequest, *, today: datetime.date | None = None) -> None:
    """The slice grant ends; the whole GPUs come back as a grant until the source grant's end,
    when the source would still hold them (active, or ended by this layout; its end not
    passed)."""
    today = today or timezone.localdate()
    if layout.slice_grant_id:
        # Already ended: expired by the sweep, or revoked by an admin.
        with contextlib.suppress(InvalidTransition):
            end_grant(
                grant_id=layout.slice_grant_id,
                to_state=GrantState.EXPIRED,
                actor=None,
                note=f"Sharing layout #{layout.pk} ended on {layout.ends_on.isoformat()}.",
            )
    source = QuotaGrant.objects.select_for_update().get(pk=layout.source_grant_id)
    holds = source.state == GrantState.ACTIVE or layout.source_ended
    if holds and (source.ends_on is None or source.ends_on >= today):
        layout.returned_grant = _auto_grant(
            layout,
            gpu_resource=DEFAULT_GPU_RESOURCE,
            gpu_model=layout.gpu_model,
            gpus=layout.gpus,
            ends_on=source.ends_on,
            justification=(
                f"Sharing layout #{layout.pk} ended: its {layout.gpus} × {layout.gpu_model} "
                f"of grant #{source.pk} are whole GPUs again until the grant's end."
            ),
            reviewer=None,
        )
    request_reconcile_after_commit(team_id=layout.team_id, cluster_id=layout.cluster_id)
