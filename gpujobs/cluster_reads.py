"""Reads from the cluster about one job, for its page and the API: its pods' logs and the events
of its Job and pods. The caller has already decided the user may see the job.

Failures are ``KubeError``s with messages that can be shown as they are; a pod whose container
has not started has no log yet, which is an answer (``LogResult.detail``), not an error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
    try:
        text = kube.pod_log(
            job.team.slug,
            name,
            container=container,
            tail_lines=max(0, min(tail, MAX_TAIL_LINES)),
            limit_bytes=MAX_LOG_BYTES,
        )
    except NotFound:
        # The pod exists (it was just listed), but its node serves no log for it.
        return LogResult(
            pod=name,
            container=container,
            text="",
            detail=f"The node does not serve a log for pod {name} ({container}).",
        )
    except Invalid as error:
        message = str(error)
        if "waiting to start" in message or "is not valid for pod" in message:
            reason = "has not started yet" if "waiting" in message else "is not in this pod"
            return LogResult(
                pod=name, container=container, text="", detail=f"Container {container} {reason}."
            )
        raise
    return LogResult(pod=name, container=container, text=text)


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
class JobEvent:
    time: object
    type: str
    reason: str
    object: str
    message: str
    count: int


def job_events(job: GpuJob, *, kube: WorkloadClient | None = None) -> list[JobEvent]:
    """Events about the job's Job and its pods, oldest first."""
    if job.state == GpuJob.State.QUEUED and not job.kube_uid:
        return []
    listing = _client(job, kube).list_objects("Event", namespace=job.team.slug)
    prefix = f"{job.kube_name}-"
    events = []
    for event in listing.items:
        involved = event.get("involvedObject") or {}
        name = involved.get("name") or ""
        kind = involved.get("kind") or ""
        if not (
            (kind == "Job" and name == job.kube_name) or (kind == "Pod" and name.startswith(prefix))
        ):
            continue
        when = (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
        )
        events.append(
            JobEvent(
                time=parse_time(when),
                type=event.get("type") or "",
                reason=event.get("reason") or "",
                object=f"{kind}/{name}",
                message=(event.get("message") or "").strip(),
                count=int(event.get("count") or 1),
            )
        )
    return sorted(events, key=lambda e: (e.time is None, e.time or 0))


__all__ = ["LogResult", "follow_job_log", "job_events", "job_log", "job_pods"]
