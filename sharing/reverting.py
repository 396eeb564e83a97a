"""Reverting an applied layout once its last day has passed (``revert_due``, from the periodic
``check_layouts``), one step per call of ``revert_step``, as ``applying`` does:

1. claim it (applied -> reverting);
2. cordon its nodes (no new slice pods) and set the GPU Operator's labels back to whole GPUs
   (``mig.config=all-disabled``; no device plugin config);
3. read the nodes until each offers its whole GPUs again and nothing shared, then uncordon
   them and, in one transaction, end the slice grant and give the whole GPUs back
   (``grants.give_back``): reverted.

A revert never gives up: when the operator reports failed, or SHARING_APPLY_TIMEOUT_SECONDS
pass, the layout says why in ``error``, the labels are set again (which makes the operator try
again) and the wait starts over.
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.kube import KubeError
from clusters.node_sharing import NodeSharingClient, node_sharing
from clusters.vocabulary import DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_DISABLED, MIG_CONFIG_LABEL
from sharing import grants
from sharing.applying import sync_capacity
from sharing.layouts import MIG, fresh_config
from sharing.models import LayoutRequest
from sharing.progress import reverting_step
from sharing.services import audit_layout, layout_snapshot, send_task
from tenants.models import AuditEvent

State = LayoutRequest.State
Action = AuditEvent.Action


def _deadline(now: datetime.datetime) -> datetime.datetime:
    return now + datetime.timedelta(seconds=settings.SHARING_APPLY_TIMEOUT_SECONDS)


def whole_labels(kind: str) -> dict[str, str | None]:
    """The labels that make a node's GPUs whole again."""
    if kind == MIG:
        return {MIG_CONFIG_LABEL: MIG_CONFIG_DISABLED}
    return {DEVICE_PLUGIN_CONFIG_LABEL: None}


def revert_due(*, today: datetime.date | None = None) -> list[int]:
    """Claim every applied layout whose last day has passed and send its revert; returns the
    ids claimed now."""
    today = today or timezone.localdate()
    now = timezone.now()
    claimed = []
    due = LayoutRequest.objects.filter(state=State.APPLIED, ends_on__lt=today)
    for layout_id in due.order_by("pk").values_list("pk", flat=True):
        taken = LayoutRequest.objects.filter(pk=layout_id, state=State.APPLIED).update(
            state=State.REVERTING,
            deadline_at=_deadline(now),
            progress="Its period ended: reverting its nodes to whole GPUs.",
            updated_at=now,
        )
        if taken:
            claimed.append(layout_id)
            send_task("revert_layout", layout_id=layout_id)
    return claimed


def resend_stalled(*, now: datetime.datetime | None = None) -> list[int]:
    """Layouts applying or reverting whose steps stopped (a worker died, the broker lost the
    message): their deadline passed with room to spare. Their task is sent again."""
    now = now or timezone.now()
    grace = datetime.timedelta(seconds=4 * settings.SHARING_POLL_SECONDS + 60)
    stalled = LayoutRequest.objects.filter(deadline_at__lt=now - grace)
    sent = []
    for layout_id, state in stalled.values_list("pk", "state"):
        if state == State.APPLYING:
            send_task("apply_layout", layout_id=layout_id)
        elif state == State.REVERTING:
            send_task("revert_layout", layout_id=layout_id)
        else:
            continue
        sent.append(layout_id)
    return sent


def _label(layout: LayoutRequest, kube: NodeSharingClient, *, nudge: bool = False) -> None:
    """Cordon the nodes and set their labels to whole GPUs; ``nudge``: take the MIG label off
    first, so the MIG manager sees a change and tries again."""
    labels = whole_labels(layout.kind)
    for name in layout.nodes:
        if nudge and layout.kind == MIG:
            kube.patch_node(name, labels={MIG_CONFIG_LABEL: None})
        kube.patch_node(name, labels=fresh_config(labels), unschedulable=True)


def revert_step(*, layout_id: int, kube: NodeSharingClient | None = None) -> float | None:
    """One step of reverting the layout; the seconds until the next one, or None: done."""
    layout = LayoutRequest.objects.select_related("cluster", "team").filter(pk=layout_id).first()
    if layout is None or layout.state != State.REVERTING:
        return None
    kube = kube or NodeSharingClient.for_cluster(layout.cluster)
    now = timezone.now()
    try:
        return _revert(layout, kube, now=now)
    except KubeError as error:
        if error.transient:
            raise
        _retry_later(layout, f"The cluster refused: {error}", now=now)
        return settings.SHARING_POLL_SECONDS


def _revert(layout: LayoutRequest, kube: NodeSharingClient, *, now) -> float | None:
    labels = whole_labels(layout.kind)
    waiting, failed = [], []
    for name in layout.nodes:
        node = kube.node(name)
        if node is None:
            continue  # gone: nothing to make whole
        reading = node_sharing(node, model_label=layout.cluster.gpu_model_label)
        if not reading.unschedulable or any(
            reading.labels.get(key) != value for key, value in labels.items()
        ):
            # Level-triggered: set what is not yet set (a node written once is left alone).
            kube.patch_node(name, labels=fresh_config(labels), unschedulable=True)
            waiting.append(f"Asked {name} for whole GPUs again.")
            continue
        step = reverting_step(reading, kind=layout.kind, gpus=layout.node_gpus.get(name, 0))
        if step.failed:
            failed.append(step.text)
        elif not step.done:
            waiting.append(step.text)
    if failed or (waiting and layout.deadline_at and now >= layout.deadline_at):
        why = " ".join(failed or waiting)
        _retry_later(layout, f"{why} Trying again.", now=now)
        _label(layout, kube, nudge=True)
        return settings.SHARING_POLL_SECONDS
    if waiting:
        LayoutRequest.objects.filter(pk=layout.pk, state=State.REVERTING).update(
            progress=" ".join(waiting), updated_at=now
        )
        return settings.SHARING_POLL_SECONDS
    for name in layout.nodes:
        before = (layout.restore.get(name) or {}).get("unschedulable", False)
        if kube.node(name) is not None:
            kube.patch_node(name, unschedulable=bool(before))
    _finish(layout)
    return None


def _retry_later(layout: LayoutRequest, why: str, *, now) -> None:
    LayoutRequest.objects.filter(pk=layout.pk, state=State.REVERTING).update(
        error=why, progress="Reverting: trying again.", deadline_at=_deadline(now), updated_at=now
    )


def _finish(layout: LayoutRequest) -> None:
    with transaction.atomic():
        locked = LayoutRequest.objects.select_for_update().select_related("team").get(pk=layout.pk)
        if locked.state != State.REVERTING:
            return
        before = layout_snapshot(locked)
        grants.give_back(locked)
        locked.state = State.REVERTED
        locked.reverted_at = timezone.now()
        locked.deadline_at = None
        locked.error = ""
        locked.progress = f"Reverted: {', '.join(locked.nodes)} offer whole GPUs again." + (
            f" The team holds {locked.gpus} × {locked.gpu_model} again until "
            f"{locked.returned_grant.ends_on or 'the source grant ends'}."
            if locked.returned_grant_id
            else " The source grant had ended, so no whole GPUs were given back."
        )
        locked.save()
        audit_layout(locked, actor=None, action=Action.LAYOUT_REVERTED, before=before)
    sync_capacity(layout)
