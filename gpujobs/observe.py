"""What the cluster says about a GPU job, in the portal's terms: a pure function of the Job, its
pods, the Job's events and, for a Job queued in Kueue, its Workload (the API's JSON) to a state,
the node, start and end times, the exit code, the reason in words when the job waits or fails,
and what Kueue did with it (admitted when, on which flavor; preempted when, why, by whom). No
database, no network.

A queued Job (one with Kueue's queue label) waits suspended: it is ``pending`` while it waits in
the queue, was preempted and requeued, or was just admitted and is being started; its Workload's
conditions say which. Once Kueue un-suspends it, its pods decide as for any Job.

The portal's Jobs run one pod at a time (``completions: 1``), so one succeeded pod means the job
succeeded, and more failed pods than ``backoffLimit`` means it failed; the Job's own conditions,
once the job controller writes them, have the last word. ``cancelled`` is never observed: only
the portal cancels, and it records that itself.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, replace

from clusters.vocabulary import DEFAULT_GPU_RESOURCE, KUEUE_QUEUE_LABEL
from gpujobs.manifests import GPU_CONTAINER
from workloads.pod_states import (
    Reason,
    container_statuses,
    is_quota_refusal,
    metadata_of,
    parse_time,
    pod_waiting_reason,
    quota_message,
    status_of,
)


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
    # From the Workload of a queued Job.
    admitted_at: datetime.datetime | None = None
    admitted_flavor: str = ""
    preemptions: int | None = None  # Kueue's count of the times it preempted the job
    preempted_at: datetime.datetime | None = None
    preemption_reason: str = ""
    preemptor_job_uid: str = ""
    preemptor_queue: str = ""
    # A queued Job Kueue suspended: whether none of its pods runs or terminates any more (a
    # terminating pod is still Running; a deleted one is gone from ``pods``).
    pods_stopped: bool = False


def _condition(obj: dict, *types: str) -> dict | None:
    for condition in status_of(obj).get("conditions") or []:
        if condition.get("type") in types and condition.get("status") == "True":
            return condition
    return None


def _created(obj: dict) -> str:
    return metadata_of(obj).get("creationTimestamp") or ""


def _gpu_containerstatus_of(pod: dict) -> dict | None:
    for container in status_of(pod).get("containerStatuses") or []:
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
    terminated = _terminated(_gpu_containerstatus_of(pod))
    if terminated and terminated.get("exitCode") is not None:
        return int(terminated["exitCode"])
    codes = [
        int(t["exitCode"])
        for t in (_terminated(c) for c in container_statuses(pod))
        if t and t.get("exitCode") is not None
    ]
    failing = [code for code in codes if code != 0]
    if failing:
        return failing[0]
    return codes[0] if codes else None


def _started_at(pod: dict) -> datetime.datetime | None:
    container = _gpu_containerstatus_of(pod) or {}
    state = container.get("state") or {}
    running = state.get("running") or {}
    terminated = _terminated(container) or {}
    return (
        parse_time(running.get("startedAt"))
        or parse_time(terminated.get("startedAt"))
        or parse_time(status_of(pod).get("startTime"))
    )


def _finished_at(pod: dict) -> datetime.datetime | None:
    times = [
        parse_time(t.get("finishedAt"))
        for t in (_terminated(c) for c in container_statuses(pod))
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
            or metadata_of(event).get("creationTimestamp")
            or ""
        )

    return max(mine, key=when)


def observe(
    job: dict | None, pods: list[dict], events: list[dict], workload: dict | None = None
) -> Observation | None:
    """The job's state from what the cluster holds; None when there is nothing to say (the Job
    has not been seen, or is being deleted). ``workload`` is the Job's own Kueue Workload, if
    it has one."""
    if job is None or metadata_of(job).get("deletionTimestamp"):
        return None
    observation = _observe_job(job, pods, events)
    queue = queue_of(job)
    if not queue:
        return observation
    if observation.state not in FINAL_STATES and (job.get("spec") or {}).get("suspend"):
        reason, message = waiting_in_queue(workload, queue=queue)
        observation = replace(
            observation,
            state=State.PENDING,
            reason=reason,
            message=message,
            pods_stopped=not any(status_of(p).get("phase") in ("Pending", "Running") for p in pods),
        )
    return replace(observation, **kueue_facts(workload, gpu_resource=gpu_resource_of(job)))


def queue_of(job: dict) -> str:
    """The LocalQueue a Job was created in ("" for a Job Kueue does not manage)."""
    return (metadata_of(job).get("labels") or {}).get(KUEUE_QUEUE_LABEL, "")


def _observe_job(job: dict, pods: list[dict], events: list[dict]) -> Observation:
    spec = job.get("spec") or {}
    status = status_of(job)
    pods = sorted(pods, key=_created)
    names = tuple(metadata_of(p).get("name", "") for p in pods)
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

    phases = [status_of(p).get("phase") for p in pods]
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
    if current is not None and status_of(current).get("phase") == "Running":
        return Observation(state=State.RUNNING, message=f"Running on node {node}.", **facts)
    if current is not None and status_of(current).get("phase") == "Pending":
        reason, message = pod_waiting_reason(current)
        return Observation(state=State.PENDING, reason=reason, message=message, **facts)

    refused = _failed_create(events, job_name=metadata_of(job).get("name", ""))
    if refused is not None:
        detail = refused.get("message") or ""
        if is_quota_refusal(detail):
            return Observation(
                state=State.PENDING,
                reason=Reason.EXCEEDED_QUOTA,
                message=quota_message(detail),
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


# --- Kueue ---------------------------------------------------------------------------------------

# Why Kueue preempted a workload (its Preempted condition's reason), in words.
PREEMPTION_REASONS = {
    "InCohortReclamation": "the team whose idle GPUs it borrowed took them back",
    "InCohortReclaimWhileBorrowing": "a team that also borrows took back GPUs of its own quota",
    "InClusterQueue": "a job of higher priority in the same queue needed its GPUs",
    "InCohortFairSharing": "idle GPUs were shared out again fairly within the cohort",
}
PREEMPTOR_JOB_UID_RE = re.compile(r"JobUID: ([^,)\s]+)")
PREEMPTOR_PATH_RE = re.compile(r"preemptor path: (\S+)")
# Kueue's words before its reason why a workload does not fit, and about flavors that were never
# candidates (another GPU model than the job's): left out of the job's message.
FLAVOR_PREFIX_RE = re.compile(r"^couldn't assign flavors to pod set [^:]+: ")
OTHER_FLAVOR_RE = re.compile(r"flavor \S+ doesn't match node affinity(, )?")


def workload_condition(workload: dict | None, kind: str) -> dict | None:
    """The Workload's condition of that type (whatever its status), or None."""
    for condition in status_of(workload or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def _is_true(condition: dict | None) -> bool:
    return bool(condition) and condition.get("status") == "True"


def gpu_resource_of(job: dict) -> str:
    """The GPU resource the Job's GPU container is limited to (the default kind when none)."""
    template = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in template.get("containers") or []:
        if container.get("name") == GPU_CONTAINER:
            limits = (container.get("resources") or {}).get("limits") or {}
            for name in limits:
                if name not in ("cpu", "memory", "ephemeral-storage"):
                    return name
    return DEFAULT_GPU_RESOURCE


def waiting_in_queue(workload: dict | None, *, queue: str) -> tuple[str, str]:
    """Why a suspended queued Job is not running, as a reason code and words."""
    where = f"the team's {queue} queue"
    if workload is None:
        return Reason.IN_QUEUE, f"Waiting for Kueue to take it into {where}."
    if _is_true(workload_condition(workload, "Admitted")):
        return Reason.ADMITTED, "Admitted by Kueue; starting."
    pending = workload_condition(workload, "QuotaReserved") or {}
    detail = FLAVOR_PREFIX_RE.sub("", (pending.get("message") or "").strip())
    detail = OTHER_FLAVOR_RE.sub("", detail).strip().rstrip(",")
    still = f": {detail}" if detail and pending.get("status") == "False" else "."
    evicted = workload_condition(workload, "Evicted")
    preempted = workload_condition(workload, "Preempted")
    requeued = workload_condition(workload, "Requeued")
    if _is_true(preempted) or (_is_true(evicted) and evicted.get("reason") == "Preempted"):
        why = PREEMPTION_REASONS.get((preempted or {}).get("reason", ""), "")
        because = f": {why}" if why else ""
        return Reason.PREEMPTED, f"Preempted{because}; requeued in {where}, waiting{still}"
    if _is_true(evicted):
        return (
            Reason.EVICTED,
            f"Evicted by Kueue ({evicted.get('reason')}: {(evicted.get('message') or '').strip()})"
            f"; requeued in {where}, waiting{still}",
        )
    if (workload.get("spec") or {}).get("active") is False:
        return Reason.IN_QUEUE, f"Deactivated in {where}: Kueue will not admit it."
    if _is_true(requeued) or pending:
        return Reason.IN_QUEUE, f"Waiting in {where}{still}"
    return Reason.IN_QUEUE, f"Waiting in {where}."


def kueue_facts(workload: dict | None, *, gpu_resource: str) -> dict:
    """What the Workload says Kueue did with the job, as ``Observation`` fields: when it was
    last admitted and on which flavor of its GPUs, how many times it was preempted, and the
    current preemption's time, reason, preemptor's Job uid and ClusterQueue (Kueue names them
    only in the condition's message)."""
    if workload is None:
        return {}
    status = status_of(workload)
    facts: dict = {
        "preemptions": sum(
            int(e.get("count") or 0)
            for e in (status.get("schedulingStats") or {}).get("evictions") or []
            if e.get("reason") == "Preempted"
        )
    }
    admitted = workload_condition(workload, "Admitted")
    if _is_true(admitted):
        facts["admitted_at"] = parse_time(admitted.get("lastTransitionTime"))
        for assignment in (status.get("admission") or {}).get("podSetAssignments") or []:
            flavor = (assignment.get("flavors") or {}).get(gpu_resource)
            if flavor:
                facts["admitted_flavor"] = flavor
                break
    preempted = workload_condition(workload, "Preempted")
    if _is_true(preempted):
        message = preempted.get("message") or ""
        uid = PREEMPTOR_JOB_UID_RE.search(message)
        path = PREEMPTOR_PATH_RE.search(message)
        reason = preempted.get("reason") or ""
        facts.update(
            preempted_at=parse_time(preempted.get("lastTransitionTime")),
            preemption_reason=PREEMPTION_REASONS.get(reason, reason),
            preemptor_job_uid=uid.group(1) if uid and uid.group(1) != "UNKNOWN" else "",
            preemptor_queue=path.group(1).rstrip(";").rsplit("/", 1)[-1] if path else "",
        )
    return facts


def waits_in_the_other_mode(job: dict, pods: list[dict], *, kueue: bool) -> bool:
    """Whether a Job waits under the rules of the quota mode its cluster has left: queued in
    Kueue (suspended, with the queue label) on a cluster now under quota only, or waiting
    outside Kueue (no queue label, no pod of it scheduled yet) on a cluster now in Kueue mode.
    A Job of which something runs, or that has finished, stays as it is."""
    status = status_of(job)
    if metadata_of(job).get("deletionTimestamp") or status.get("completionTime"):
        return False
    if any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    ):
        return False
    queued = bool(queue_of(job))
    if queued and not kueue:
        return bool((job.get("spec") or {}).get("suspend"))
    if not queued and kueue:
        return (
            not status.get("succeeded")
            and not status.get("failed")
            and all(
                (p.get("status") or {}).get("phase") == "Pending"
                and not (p.get("spec") or {}).get("nodeName")
                for p in pods
            )
        )
    return False
