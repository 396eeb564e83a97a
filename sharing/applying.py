"""Applying an approved layout on its cluster, one step per call of ``apply_step`` (the task
``apply_layout`` calls it and, while it answers a number, calls it again that many seconds
later instead of sleeping):

1. claim the layout (approved -> applying, with a deadline of SHARING_APPLY_TIMEOUT_SECONDS);
2. pick the nodes (``placement``), record them and their sharing labels and cordon as they
   are, then cordon them and set the GPU Operator's label;
3. read the nodes until each offers its slices (MIG: ``mig.config.state=success`` too), then
   uncordon them and, in one transaction, change the grants (``grants.convert``): applied;
4. the operator reporting failed, the deadline passing, or the grants no longer holding the
   GPUs: put the nodes back as they were (``put_back``), grants untouched: failed, with why.

Every step is safe to run twice: the claim and the record of the nodes are conditional, node
patches set the same values again, and the grants change under the layout's row lock only
while it is still applying.
"""

from __future__ import annotations

import datetime
import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.capacity import capacity_sync
from clusters.kube import KubeError, NotFound
from clusters.node_sharing import (
    SHARING_LABELS,
    NodeSharingClient,
    gpu_pods_on,
    node_sharing,
)
from clusters.vocabulary import MIG_CONFIG_STATE_LABEL
from sharing import grants
from sharing.layouts import fresh_config, operator_label, per_gpu
from sharing.models import LayoutRequest
from sharing.placement import candidates, pick_nodes, why_none
from sharing.progress import applying_step, label_of, picked_text, timed_out_text
from sharing.services import audit_layout, layout_snapshot
from tenants.models import AuditEvent

logger = logging.getLogger(__name__)
State = LayoutRequest.State
Action = AuditEvent.Action


def _deadline(now: datetime.datetime) -> datetime.datetime:
    return now + datetime.timedelta(seconds=settings.SHARING_APPLY_TIMEOUT_SECONDS)


def apply_step(*, layout_id: int, kube: NodeSharingClient | None = None) -> float | None:
    """One step of applying the layout; the seconds until the next one, or None: done (applied,
    failed, or not the worker's to apply)."""
    now = timezone.now()
    LayoutRequest.objects.filter(pk=layout_id, state=State.APPROVED).update(
        state=State.APPLYING,
        deadline_at=_deadline(now),
        progress="Picking the nodes.",
        updated_at=now,
    )
    layout = LayoutRequest.objects.select_related("cluster", "team").filter(pk=layout_id).first()
    if layout is None or layout.state != State.APPLYING:
        return None
    kube = kube or NodeSharingClient.for_cluster(layout.cluster)
    try:
        if not layout.nodes:
            return _pick_and_label(layout, kube)
        return _watch(layout, kube, now=now)
    except KubeError as error:
        if error.transient:
            raise
        fail(layout, f"The cluster refused: {error}", kube=kube)
        return None


def _pick_and_label(layout: LayoutRequest, kube: NodeSharingClient) -> float | None:
    model_label = layout.cluster.gpu_model_label
    readings = [node_sharing(node, model_label=model_label) for node in kube.gpu_nodes()]
    found = candidates(readings, gpu_pods_on(kube.unfinished_pods()), gpu_model=layout.gpu_model)
    pick = pick_nodes(found.free, layout.gpus)
    if pick is None:
        fail(layout, why_none(found, gpus=layout.gpus, gpu_model=layout.gpu_model), kube=None)
        return None
    by_name = {reading.name: reading for reading in readings}
    restore = {
        name: {
            "labels": {
                **{label: by_name[name].labels.get(label) for label in SHARING_LABELS},
                MIG_CONFIG_STATE_LABEL: by_name[name].mig_state or None,
            },
            "unschedulable": by_name[name].unschedulable,
        }
        for name in pick.nodes
    }
    value = operator_label(layout.kind, layout.mig_profile, layout.replicas)
    progress = picked_text(
        pick,
        kind=layout.kind,
        label_value=value,
        resource=layout.slice_resource,
        per_gpu=per_gpu(layout.kind, layout.gpu_model, layout.mig_profile, layout.replicas),
    )
    with transaction.atomic():
        locked = LayoutRequest.objects.select_for_update().get(pk=layout.pk)
        if locked.state != State.APPLYING or locked.nodes:
            return settings.SHARING_POLL_SECONDS  # another run picked them: follow its nodes
        locked.nodes = list(pick.nodes)
        locked.node_gpus = dict(pick.nodes)
        locked.restore = restore
        locked.progress = progress
        locked.save(update_fields=["nodes", "node_gpus", "restore", "progress", "updated_at"])
    # Recorded first: a worker that dies between these patches leaves what to put back.
    for name in pick.nodes:
        kube.patch_node(
            name, labels=fresh_config({label_of(layout.kind): value}), unschedulable=True
        )
    return settings.SHARING_POLL_SECONDS


def _watch(layout: LayoutRequest, kube: NodeSharingClient, *, now) -> float | None:
    expected_per_gpu = per_gpu(layout.kind, layout.gpu_model, layout.mig_profile, layout.replicas)
    waiting = []
    for name in layout.nodes:
        node = kube.node(name)
        if node is None:
            fail(layout, f"Node {name} is gone from the cluster.", kube=kube)
            return None
        step = applying_step(
            node_sharing(node, model_label=layout.cluster.gpu_model_label),
            kind=layout.kind,
            resource=layout.slice_resource,
            expected=layout.node_gpus[name] * expected_per_gpu,
        )
        if step.failed:
            fail(layout, step.text, kube=kube)
            return None
        if not step.done:
            waiting.append(step.text)
    if waiting:
        if layout.deadline_at and now >= layout.deadline_at:
            seconds = settings.SHARING_APPLY_TIMEOUT_SECONDS
            fail(layout, timed_out_text(" ".join(waiting), seconds=seconds), kube=kube)
            return None
        LayoutRequest.objects.filter(pk=layout.pk, state=State.APPLYING).update(
            progress=" ".join(waiting), updated_at=now
        )
        return settings.SHARING_POLL_SECONDS
    _uncordon(layout, kube)
    _finish(layout, kube)
    return None


def _uncordon(layout: LayoutRequest, kube: NodeSharingClient) -> None:
    for name in layout.nodes:
        before = (layout.restore.get(name) or {}).get("unschedulable", False)
        kube.patch_node(name, unschedulable=bool(before))


def _finish(layout: LayoutRequest, kube: NodeSharingClient) -> None:
    """The nodes offer the slices: change the grants, or, when the source grant no longer holds
    the GPUs, put the nodes back and fail."""
    with transaction.atomic():
        locked = LayoutRequest.objects.select_for_update().select_related("team").get(pk=layout.pk)
        if locked.state != State.APPLYING:
            return
        before = layout_snapshot(locked)
        refused = grants.convert(locked)
        if refused is None:
            locked.state = State.APPLIED
            locked.applied_at = timezone.now()
            locked.deadline_at = None
            locked.progress = (
                f"Applied on {', '.join(locked.nodes)}: the team holds {locked.describe} "
                f"until {locked.ends_on.isoformat()}."
            )
            locked.error = ""
            locked.save()
            audit_layout(locked, actor=None, action=Action.LAYOUT_APPLIED, before=before)
    if refused is not None:
        fail(layout, refused, kube=kube)
        return
    sync_capacity(layout)


def sync_capacity(layout: LayoutRequest) -> None:
    """The cluster's capacity rows follow the changed nodes (the slices are a GPU kind now)."""
    try:
        capacity_sync(cluster=layout.cluster)
    except KubeError:
        logger.exception("capacity sync after sharing layout %s", layout.pk)


def put_back(layout: LayoutRequest, kube: NodeSharingClient) -> list[str]:
    """The picked nodes' sharing labels and cordon as they were before; what could not be put
    back, in words (a node that is gone needs nothing)."""
    problems = []
    for name, before in (layout.restore or {}).items():
        try:
            kube.patch_node(
                name,
                labels=dict(before.get("labels") or {}),
                unschedulable=bool(before.get("unschedulable")),
            )
        except NotFound:
            continue
        except KubeError as error:
            if error.transient:
                raise
            problems.append(f"{name}: {error}")
    return problems


def fail(layout: LayoutRequest, reason: str, *, kube: NodeSharingClient | None) -> None:
    """Put the nodes back (when any were changed) and record the failure; grants untouched."""
    problems = put_back(layout, kube) if kube is not None and layout.restore else []
    with transaction.atomic():
        locked = LayoutRequest.objects.select_for_update().select_related("team").get(pk=layout.pk)
        if locked.state != State.APPLYING:
            return
        before = layout_snapshot(locked)
        locked.state = State.FAILED
        locked.deadline_at = None
        locked.error = reason
        locked.progress = (
            "Failed; the nodes' labels and cordon were put back as they were and the grants "
            "are unchanged."
            if locked.restore
            else "Failed before any node was changed; the grants are unchanged."
        )
        if problems:
            locked.progress += " Could not put back: " + "; ".join(problems)
        locked.save()
        audit_layout(locked, actor=None, action=Action.LAYOUT_FAILED, before=before, note=reason)
