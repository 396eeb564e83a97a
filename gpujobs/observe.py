"""What the cluster says about a GPU job, in the portal's terms: a pure function of the Job, its
pods and the Job's events (the API's JSON) to a state, the node, start and end times, the exit
code, and the reason in words when the job waits or fails. No database, no network.

The portal's Jobs run one pod at a time (``completions: 1``), so one succeeded pod means the job
succeeded, and more failed pods than ``backoffLimit`` means it failed; the Job's own conditions,
once the job controller writes them, have the last word. ``cancelled`` is never observed: only
the portal cancels, and it records that itself.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from gpujobs.manifests import GPU_CONTAINER


class State:
    QUEUED = "queued"
    SUBMITTED = "submitted"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})
ACTIVE_STATES = frozenset({State.QUEUED, State.SUBMITTED, State.PENDING, State.RUNNING})


class Reason:
    """Short codes for why a job waits or ended; ``message`` says it in words."""

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


QUOTA_USED_UP = "The team's GPU quota is used up"
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


@dataclass(frozen=True)
class Observation:
    """One look at a job on the cluster. Empty fields mean "not known from this look", never
    "cleared": the portal keeps what it learned before (a node, an exit code)."""

    state: str
    node: str = ""
    started_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    pods: tuple[str, ...] = ()


def parse_time(value: str | None) -> datetime.datetime | None:
    """An RFC 3339 time from the API (``2026-01-02T03:04:05Z``), timezone-aware."""
    if not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _metadata(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _status(obj: dict) -> dict:
    return obj.get("status") or {}


def _condition(obj: dict, *types: str) -> dict | None:
    for condition in _status(obj).get("conditions") or []:
        if condition.get("type") in types and condition.get("status") == "True":
            return condition
    return None


def _created(obj: dict) -> str:
    return _metadata(obj).get("creationTimestamp") or ""


def _container_statuses(pod: dict) -> list[dict]:
    status = _status(pod)
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _gpu_container_status(pod: dict) -> dict | None:
    for container in _status(pod).get("containerStatuses") or []:
        if container.get("name") == GPU_CONTAINER:
            return container
    return None


def _terminated(container: dict | None) -> dict | None:
    if not container:
        return None
    state = container.get("state") or {}
    return state.get("terminated") or (container.get("lastState") or {}).get("terminated")


def exit_code(pod: dict) -> int | None:
    """The GPU container's exit code; failing that, the first non-zero one of any container
    (a preprocessing step that failed is why the job failed)."""
    terminated = _terminated(_gpu_container_status(pod))
    if terminated and terminated.get("exitCode") is not None:
        return int(terminated["exitCode"])
    codes = [
        int(t["exitCode"])
        for t in (_terminated(c) for c in _container_statuses(pod))
        if t and t.get("exitCode") is not None
    ]
    failing = [code for code in codes if code != 0]
    if failing:
        return failing[0]
    return codes[0] if codes else None


def _started_at(pod: dict) -> datetime.datetime | None:
    container = _gpu_container_status(pod) or {}
    state = container.get("state") or {}
    running = state.get("running") or {}
    terminated = _terminated(container) or {}
    return (
        parse_time(running.get("startedAt"))
        or parse_time(terminated.get("startedAt"))
        or parse_time(_status(pod).get("startTime"))
    )


def _finished_at(pod: dict) -> datetime.datetime | None:
    times = [
        parse_time(t.get("finishedAt"))
        for t in (_terminated(c) for c in _container_statuses(pod))
        if t
    ]
    times = [t for t in times if t is not None]
    return max(times) if times else None


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "its maximum run time"
    if seconds % 3600 == 0:
        return f"its maximum run time of {seconds // 3600} h"
    if seconds % 60 == 0:
        return f"its maximum run time of {seconds // 60} min"
    return f"its maximum run time of {seconds} s"


def _quota_message(detail: str) -> str:
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


def pod_waiting_reason(pod: dict) -> tuple[str, str]:
    """Why a pod that is not running yet waits: the scheduler, the image, or just starting.
    Any workload's pod (a job's, a service replica's)."""
    scheduled = next(
        (c for c in _status(pod).get("conditions") or [] if c.get("type") == "PodScheduled"), None
    )
    if scheduled and scheduled.get("status") == "False":
        return scheduling_message(scheduled.get("message") or scheduled.get("reason") or "")
    for container in _container_statuses(pod):
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
    if _metadata(pod).get("deletionTimestamp"):
        return Reason.STARTING, "The pod is being removed."
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return Reason.STARTING, f"Starting on node {node}."
    return Reason.STARTING, "Waiting to be scheduled."


def _failed_create(events: list[dict], *, job_name: str) -> dict | None:
    """The latest event saying the job controller could not create the job's pod."""
    mine = [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("name") == job_name
        and e.get("reason") == "FailedCreate"
    ]
    if not mine:
        return None

    def when(event: dict) -> str:
        return (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or _metadata(event).get("creationTimestamp")
            or ""
        )

    return max(mine, key=when)


def observe(job: dict | None, pods: list[dict], events: list[dict]) -> Observation | None:
    """The job's state from what the cluster holds; None when there is nothing to say (the Job
    has not been seen, or is being deleted)."""
    if job is None or _metadata(job).get("deletionTimestamp"):
        return None
    spec = job.get("spec") or {}
    status = _status(job)
    pods = sorted(pods, key=_created)
    names = tuple(_metadata(p).get("name", "") for p in pods)
    current = pods[-1] if pods else None
    node = ((current or {}).get("spec") or {}).get("nodeName") or ""
    started = _started_at(current) if current else None
    code = None
    for pod in reversed(pods):
        code = exit_code(pod)
        if code is not None:
            break
    finished = next(
        (f for f in (_finished_at(p) for p in reversed(pods)) if f is not None),
        None,
    )
    facts = {"node": node, "started_at": started, "exit_code": code, "pods": names}

    done = _condition(job, "Complete", "SuccessCriteriaMet")
    failed = _condition(job, "Failed", "FailureTarget")
    if done:
        end = parse_time(status.get("completionTime")) or parse_time(done.get("lastTransitionTime"))
        return Observation(
            state=State.SUCCEEDED,
            finished_at=end or finished,
            reason=Reason.COMPLETED,
            message="Finished successfully.",
            **facts,
        )
    if failed:
        reason = failed.get("reason") or ""
        end = parse_time(failed.get("lastTransitionTime")) or finished
        if reason == "DeadlineExceeded":
            return Observation(
                state=State.FAILED,
                finished_at=end,
                reason=Reason.DEADLINE_EXCEEDED,
                message=f"Deadline exceeded: stopped after "
                f"{_duration(spec.get('activeDeadlineSeconds'))}.",
                **facts,
            )
        return Observation(
            state=State.FAILED,
            finished_at=finished or end,
            reason=Reason.BACKOFF_LIMIT if reason == "BackoffLimitExceeded" else reason,
            message=_failure_message(code, failed.get("message") or ""),
            **facts,
        )

    phases = [_status(p).get("phase") for p in pods]
    if "Succeeded" in phases:
        return Observation(
            state=State.SUCCEEDED,
            finished_at=finished,
            reason=Reason.COMPLETED,
            message="Finished successfully.",
            **facts,
        )
    if phases.count("Failed") > int(spec.get("backoffLimit") or 0):
        return Observation(
            state=State.FAILED,
            finished_at=finished,
            reason=Reason.BACKOFF_LIMIT,
            message=_failure_message(code, ""),
            **facts,
        )
    if current is not None and _status(current).get("phase") == "Running":
        return Observation(state=State.RUNNING, message=f"Running on node {node}.", **facts)
    if current is not None and _status(current).get("phase") == "Pending":
        reason, message = pod_waiting_reason(current)
        return Observation(state=State.PENDING, reason=reason, message=message, **facts)

    refused = _failed_create(events, job_name=_metadata(job).get("name", ""))
    if refused is not None:
        detail = refused.get("message") or ""
        if is_quota_refusal(detail):
            return Observation(
                state=State.PENDING,
                reason=Reason.EXCEEDED_QUOTA,
                message=_quota_message(detail),
                **facts,
            )
        return Observation(
            state=State.PENDING,
            reason=Reason.POD_CREATE_FAILED,
            message=f"The cluster could not create the pod: {detail.strip()}",
            **facts,
        )
    if current is not None:  # a failed pod that will be retried
        return Observation(
            state=State.PENDING, reason=Reason.STARTING, message="Retrying.", **facts
        )
    return Observation(state=State.SUBMITTED, message="Waiting for the job controller.", **facts)


def _failure_message(code: int | None, detail: str) -> str:
    if code is not None:
        return f"The container exited with code {code}."
    return f"Failed: {detail.strip()}" if detail.strip() else "Failed."
