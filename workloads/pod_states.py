"""What a pod's status says, in the portal's terms, for any workload's pod (a job's, a service
replica's): why it waits (the scheduler, Kueue's gate, the image, its configuration), the
reason codes every workload shares, and the times the API writes. Pure: the API's JSON in,
codes and words out.
"""

from __future__ import annotations

import datetime
import re

from clusters.vocabulary import DEFAULT_GPU_RESOURCE, KUEUE_ADMISSION_GATE


class Reason:
    """Short codes for why a workload (a job, a service's replicas) waits or ended; a message
    says it in words."""

    UNSCHEDULABLE = "Unschedulable"
    NO_FREE_GPUS = "InsufficientGPUs"
    EXCEEDED_QUOTA = "ExceededQuota"
    IMAGE_PULL = "ImagePullFailed"
    CONTAINER_CONFIG = "ContainerConfigError"
    POD_CREATE_FAILED = "FailedCreate"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    BACKOFF_LIMIT = "BackoffLimitExceeded"
    COMPLETED = "Completed"
    STARTING = "Starting"
    JOB_GONE = "JobDeleted"
    SUBMIT_FAILED = "SubmitFailed"
    CANCELLED = "Cancelled"
    IDLE_STOPPED = "IdleStopped"
    # Kueue mode: waiting in the team's queue, admitted and starting, preempted (or otherwise
    # evicted) and requeued; Kueue's webhook refusing to take the Job; the Job moved between
    # modes when its cluster's quota mode changed.
    IN_QUEUE = "InQueue"
    ADMITTED = "Admitted"
    PREEMPTED = "Preempted"
    EVICTED = "Evicted"
    KUEUE_NOT_ADMITTING = "KueueNotAdmitting"
    QUOTA_MODE_CHANGED = "QuotaModeChanged"
    # Waiting in the portal, not sent to the cluster: its member's own limit in the team is
    # reached (``workloads.member_limits``).
    MEMBER_LIMIT = "MemberLimit"


QUOTA_USED_UP = "The team's GPU quota is used up"
# The scheduler's reason for a pod it leaves alone while the pod has scheduling gates.
SCHEDULING_GATED = "SchedulingGated"
NO_GPU_NODE = "No GPU node has enough free GPUs"
IMAGE_PULL_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "RegistryUnavailable",
    }
)
CONFIG_ERROR_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})


def parse_time(value: str | None) -> datetime.datetime | None:
    """An RFC 3339 time from the API (``2026-01-02T03:04:05Z``), timezone-aware."""
    if not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def metadata_of(obj: dict) -> dict:
    return obj.get("metadata") or {}


def status_of(obj: dict) -> dict:
    return obj.get("status") or {}


def container_statuses(pod: dict) -> list[dict]:
    status = status_of(pod)
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def quota_message(detail: str) -> str:
    return f"{QUOTA_USED_UP}: the cluster refused the pod ({detail.strip()})."


def is_quota_refusal(message: str) -> bool:
    return "exceeded quota" in message


def scheduling_message(detail: str) -> tuple[str, str]:
    """The scheduler's ``Unschedulable`` message as a reason code and words."""
    if re.search(r"Insufficient [\w./-]*gpu", detail) or DEFAULT_GPU_RESOURCE in detail:
        return Reason.NO_FREE_GPUS, f"{NO_GPU_NODE}. The scheduler says: {detail.strip()}"
    return (
        Reason.UNSCHEDULABLE,
        f"No node can take the pod (check the GPU model). The scheduler says: {detail.strip()}",
    )


def _kueue_gated(pod: dict) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(gate.get("name") == KUEUE_ADMISSION_GATE for gate in gates)


def pod_waiting_reason(pod: dict) -> tuple[str, str]:
    """Why a pod that is not running yet waits: the scheduler, the image, or just starting.
    Any workload's pod (a job's, a service replica's)."""
    scheduled = next(
        (c for c in status_of(pod).get("conditions") or [] if c.get("type") == "PodScheduled"), None
    )
    if scheduled and scheduled.get("status") == "False":
        if scheduled.get("reason") == SCHEDULING_GATED and _kueue_gated(pod):
            return Reason.IN_QUEUE, "Waiting in the team's queue for Kueue to admit it."
        return scheduling_message(scheduled.get("message") or scheduled.get("reason") or "")
    for container in container_statuses(pod):
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason") or ""
        detail = (waiting.get("message") or "").strip()
        if reason in IMAGE_PULL_REASONS:
            return (
                Reason.IMAGE_PULL,
                f"The image of container {container.get('name')} cannot be pulled ({reason}"
                + (f": {detail}" if detail else "")
                + ").",
            )
        if reason in CONFIG_ERROR_REASONS:
            return (
                Reason.CONTAINER_CONFIG,
                f"Container {container.get('name')} cannot be created ({reason}"
                + (f": {detail}" if detail else "")
                + ").",
            )
    if metadata_of(pod).get("deletionTimestamp"):
        return Reason.STARTING, "The pod is being removed."
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return Reason.STARTING, f"Starting on node {node}."
    return Reason.STARTING, "Waiting to be scheduled."
