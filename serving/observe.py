"""What the cluster says about a service's revision, in the portal's terms: a pure function of
its Deployment, the Deployment's ReplicaSets and its pods (the API's JSON) to replicas desired,
running and ready, the pods and their nodes, and in words why replicas are not ready (the
team's quota used up, no GPU node with room, an image that cannot be pulled, the readiness
probe). No database, no network. ``rollout_progress`` says how far a service's rollout is.

A pod's reasons are read as a job's are (``workloads.pod_states.pod_waiting_reason``); a pod the
API server refused never exists, so quota refusals are read from the ReplicaSet's (and the
Deployment's) ``ReplicaFailure`` condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workloads.pod_states import (
    QUOTA_USED_UP,
    Reason,
    is_quota_refusal,
    parse_time,
    pod_waiting_reason,
)


class ServiceReason:
    """Short codes beside ``workloads.pod_states.Reason``'s for why a revision is as it is."""

    READY = "Ready"
    STOPPED = "Stopped"
    STARTING = Reason.STARTING
    NOT_READY = "NotReady"  # running, but the readiness probe has not passed yet
    PROGRESS_DEADLINE = "ProgressDeadlineExceeded"
    REMOVED = "Removed"


@dataclass(frozen=True)
class RevisionObservation:
    """One look at a revision on the cluster."""

    desired: int
    current: int
    ready: int
    updated: int
    reason: str
    message: str
    pods: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


def _metadata(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _status(obj: dict) -> dict:
    return obj.get("status") or {}


def _condition(obj: dict, kind: str) -> dict | None:
    for condition in _status(obj).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def _alive(pod: dict) -> bool:
    return not _metadata(pod).get("deletionTimestamp") and _status(pod).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _ready(pod: dict) -> bool:
    condition = _condition(pod, "Ready")
    return bool(condition and condition.get("status") == "True")


def _replica_failure(deployment: dict, replica_sets: Sequence[dict]) -> str:
    """The controllers' word that a pod could not be created (the newest), or ""."""
    found = []
    for obj in (*replica_sets, deployment):
        condition = _condition(obj, "ReplicaFailure")
        if condition and condition.get("status") == "True":
            when = parse_time(condition.get("lastTransitionTime"))
            found.append((when.timestamp() if when else 0, condition.get("message") or ""))
    return max(found)[1] if found else ""


def observe_revision(
    deployment: dict | None, replica_sets: Sequence[dict], pods: Sequence[dict]
) -> RevisionObservation:
    """The revision's replicas and, when not all are ready, why."""
    alive = sorted((p for p in pods if _alive(p)), key=lambda p: _metadata(p).get("name", ""))
    names = tuple(_metadata(p).get("name", "") for p in alive)
    nodes = tuple(sorted({(p.get("spec") or {}).get("nodeName") for p in alive} - {None, ""}))
    if deployment is None:
        if alive:
            return RevisionObservation(
                0,
                len(alive),
                0,
                0,
                ServiceReason.REMOVED,
                "Its pods are being removed.",
                names,
                nodes,
            )
        return RevisionObservation(0, 0, 0, 0, ServiceReason.REMOVED, "Not on the cluster.")
    desired = int((deployment.get("spec") or {}).get("replicas") or 0)
    status = _status(deployment)
    # The pods' own Ready conditions, not the Deployment's status: the watcher sees them first.
    ready = min(sum(1 for p in alive if _ready(p)), desired)
    facts = {
        "desired": desired,
        "current": len(alive),
        "ready": ready,
        "updated": int(status.get("updatedReplicas") or 0),
        "pods": names,
        "nodes": nodes,
    }
    if desired == 0:
        message = "Scaled to zero: no replica holds GPUs."
        if alive:
            message = f"Scaling to zero: {len(alive)} replica(s) still stopping."
        return RevisionObservation(reason=ServiceReason.STOPPED, message=message, **facts)
    if ready >= desired:
        return RevisionObservation(
            reason=ServiceReason.READY, message=f"All {desired} replicas ready.", **facts
        )
    progress = f"{ready} of {desired} replicas ready. "
    refused = _replica_failure(deployment, replica_sets)
    if refused and len(alive) < desired:
        if is_quota_refusal(refused):
            return RevisionObservation(
                reason=Reason.EXCEEDED_QUOTA,
                message=f"{progress}{QUOTA_USED_UP}: the cluster refused a replica's pod "
                f"({refused.strip()}).",
                **facts,
            )
        return RevisionObservation(
            reason=Reason.POD_CREATE_FAILED,
            message=f"{progress}The cluster could not create a replica's pod: {refused.strip()}",
            **facts,
        )
    pending = [p for p in alive if _status(p).get("phase") == "Pending"]
    if pending:
        reason, why = pod_waiting_reason(pending[0])
        return RevisionObservation(reason=reason, message=f"{progress}{why}", **facts)
    stuck = _condition(deployment, "Progressing")
    if stuck and stuck.get("reason") == ServiceReason.PROGRESS_DEADLINE:
        return RevisionObservation(
            reason=ServiceReason.PROGRESS_DEADLINE,
            message=f"{progress}No progress: {stuck.get('message') or ''}".strip(),
            **facts,
        )
    if any(not _ready(p) for p in alive):
        return RevisionObservation(
            reason=ServiceReason.NOT_READY,
            message=f"{progress}Waiting for the readiness probe of the running replicas.",
            **facts,
        )
    return RevisionObservation(
        reason=ServiceReason.STARTING, message=f"{progress}Creating replicas.", **facts
    )


def rollout_progress(*, rollout: str, state: str, revisions: Sequence) -> str:
    """How far the service's rollout has got, in words, from its live revisions (rows with
    ``number``, ``role``, ``replicas``, ``ready_replicas``, ``weight``, ``variant``, ``message``;
    stable first)."""
    if state == "stopped":
        return "Stopped: every revision is scaled to zero."
    if state in ("deleting", "deleted"):
        return "Deleted." if state == "deleted" else "Being removed from the cluster."
    stable = next((r for r in revisions if r.role == "stable"), None)
    candidate = next((r for r in revisions if r.role == "candidate"), None)
    if stable is None:
        return ""
    if candidate is None or rollout == "none":
        return f"r{stable.number}: {stable.ready_replicas} of {stable.replicas} replicas ready."
    ready = f"{candidate.ready_replicas} of {candidate.replicas} replicas ready"
    if rollout == "rolling":
        return (
            f"Rolling out r{candidate.number} ({ready}); it takes over from r{stable.number} "
            "once all are ready."
        )
    if rollout == "canary":
        return (
            f"Canary r{candidate.number} takes {candidate.weight}% ({ready}); promote it or "
            "roll it back."
        )
    return (
        f"A/B test: {stable.variant} (r{stable.number}) {stable.weight}% / {candidate.variant} "
        f"(r{candidate.number}) {candidate.weight}% ({ready}); promote one."
    )
