"""Reads from the cluster about one job, for its page and the API: its pods' logs and the events
of its Job and pods. The caller has already decided the user may see the job.

Failures are ``KubeError``s with messages that can be shown as they are; a pod whose container
has not started has no log yet, which is an answer (``LogResult.detail``), not an error.

``read_log`` and ``events_about`` read any workload's pod log and events (a service replica's:
``serving.cluster_reads``); the ``job_*`` functions find a job's pods and objects for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from clusters.kube import Invalid, NotFound
from clusters.vocabulary import JOB_ID_LABEL
from clusters.workloads import WorkloadClient
from gpujobs import manifests
from gpujobs.models import GpuJob
from gpujobs.observe import parse_time

MAX_TAIL_LINES = 5000
DEFAULT_TAIL_LINES = 100
MAX_LOG_BYTES = 2 * 1024 * 1024
CONTAINERS = (manifests.GPU_CONTAINER, manifests.PREPROCESS_CONTAINER)


@dataclass(frozen=True)
class LogResult:
    pod: str | None
    container: str
    text: str
    detail: str = ""


def _client(job: GpuJob, kube: WorkloadClient | None) -> WorkloadClient:
    return kube or WorkloadClient.for_cluster(job.cluster)


def job_pods(job: GpuJob, *, kube: WorkloadClient | None = None) -> list[dict]:
    """The job's pods on the cluster now, oldest first."""
    if not job.kube_uid and job.state == GpuJob.State.QUEUED:
        return []
    listing = _client(job, kube).list_objects(
        "Pod",
        namespace=job.team.slug,
        label_selector=f"{JOB_ID_LABEL}={job.pk}",
    )
    pods = [
        p
        for p in listing.items
        if not job.kube_uid
        or any(o.get("uid") == job.kube_uid for o in p["metadata"].get("ownerReferences") or [])
    ]
    return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")


def _pick_pod(job: GpuJob, pod: str | None, kube: WorkloadClient) -> tuple[str | None, str]:
    pods = job_pods(job, kube=kube)
    names = [p["metadata"]["name"] for p in pods]
    if pod:
        if pod not in names:
            return None, f"Pod {pod} is not one of this job's pods."
        return pod, ""
    if not names:
        if job.state == GpuJob.State.QUEUED:
            return None, "The job is queued: it has no pod yet."
        if job.is_final:
            return None, "The job's pods are gone (removed when it ended or expired)."
        return None, "The job has no pod yet."
    return names[-1], ""


def job_log(
    job: GpuJob,
    *,
    tail: int = DEFAULT_TAIL_LINES,
    container: str = manifests.GPU_CONTAINER,
    pod: str | None = None,
    kube: WorkloadClient | None = None,
) -> LogResult:
    """The last ``tail`` lines of a container's log in the job's newest pod (or ``pod``)."""
    kube = _client(job, kube)
    name, detail = _pick_pod(job, pod, kube)
    if name is None:
        return LogResult(pod=None, container=container, text="", detail=detail)
    return read_log(kube, namespace=job.team.slug, pod=name, container=container, tail=tail)


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


def follow_job_log(
    job: GpuJob,
    *,
    tail: int = DEFAULT_TAIL_LINES,
    container: str = manifests.GPU_CONTAINER,
    pod: str | None = None,
    kube: WorkloadClient | None = None,
) -> tuple[str | None, AsyncIterator[str] | None, str]:
    """``(pod, lines, detail)``: the log's last ``tail`` lines and then each new one as it is
    written, until the container ends, as an async iterator (read on the event loop: see
    ``gpujobs.log_follows``). ``lines`` is None when there is nothing to follow."""
    kube = _client(job, kube)
    name, detail = _pick_pod(job, pod, kube)
    if name is None:
        return None, None, detail
    lines = kube.follow_pod_log(
        job.team.slug, name, container=container, tail_lines=max(0, min(tail, MAX_TAIL_LINES))
    )
    return name, lines, ""


@dataclass(frozen=True)
class WorkloadEvent:
    time: object
    type: str
    reason: str
    object: str
    message: str
    count: int


def job_events(job: GpuJob, *, kube: WorkloadClient | None = None) -> list[WorkloadEvent]:
    """Events about the job's Job and its pods, oldest first."""
    if job.state == GpuJob.State.QUEUED and not job.kube_uid:
        return []
    prefix = f"{job.kube_name}-"

    def about(kind: str, name: str) -> bool:
        return (kind == "Job" and name == job.kube_name) or (
            kind == "Pod" and name.startswith(prefix)
        )

    return events_about(_client(job, kube), namespace=job.team.slug, about=about)


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


__all__ = [
    "LogResult",
    "WorkloadEvent",
    "events_about",
    "follow_job_log",
    "job_events",
    "job_log",
    "job_pods",
    "read_log",
]
