"""Reads from the cluster about any workload's pods, for its page and the API: a container's
log and the events about the workload's objects. The caller has already decided the user may
see the workload and found its pods (``gpujobs.cluster_reads``, ``serving.cluster_reads``).

Failures are ``KubeError``s with messages that can be shown as they are; a pod whose container
has not started has no log yet, which is an answer (``LogResult.detail``), not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clusters.kube import Invalid, NotFound
from clusters.workloads import WorkloadClient
from workloads.pod_states import parse_time

MAX_TAIL_LINES = 5000
DEFAULT_TAIL_LINES = 100
MAX_LOG_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class LogResult:
    pod: str | None
    container: str
    text: str
    detail: str = ""


def read_log(
    kube: WorkloadClient, *, namespace: str, pod: str, container: str, tail: int
) -> LogResult:
    """The last ``tail`` lines of a container's log in a pod of any workload; a container with
    no log to serve (not started, not in the pod, a node that keeps none) is an answer."""
    try:
        text = kube.pod_log(
            namespace,
            pod,
            container=container,
            tail_lines=max(0, min(tail, MAX_TAIL_LINES)),
            limit_bytes=MAX_LOG_BYTES,
        )
    except NotFound:
        # The pod exists (it was just listed), but its node serves no log for it.
        return LogResult(
            pod=pod,
            container=container,
            text="",
            detail=f"The node does not serve a log for pod {pod} ({container}).",
        )
    except Invalid as error:
        message = str(error)
        if "waiting to start" in message or "is not valid for pod" in message:
            reason = "has not started yet" if "waiting" in message else "is not in this pod"
            return LogResult(
                pod=pod, container=container, text="", detail=f"Container {container} {reason}."
            )
        raise
    return LogResult(pod=pod, container=container, text=text)


@dataclass(frozen=True)
class WorkloadEvent:
    time: object
    type: str
    reason: str
    object: str
    message: str
    count: int


def events_about(
    kube: WorkloadClient, *, namespace: str, about: Callable[[str, str], bool]
) -> list[WorkloadEvent]:
    """The namespace's events whose involved object (kind, name) is ``about`` a workload's,
    oldest first."""
    listing = kube.list_objects("Event", namespace=namespace)
    events = []
    for event in listing.items:
        involved = event.get("involvedObject") or {}
        name = involved.get("name") or ""
        kind = involved.get("kind") or ""
        if not about(kind, name):
            continue
        when = (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
        )
        events.append(
            WorkloadEvent(
                time=parse_time(when),
                type=event.get("type") or "",
                reason=event.get("reason") or "",
                object=f"{kind}/{name}",
                message=(event.get("message") or "").strip(),
                count=int(event.get("count") or 1),
            )
        )
    return sorted(events, key=lambda e: (e.time is None, e.time or 0))
