"""Reads from the cluster about one job, for its page and the API: its pods' logs and the events
of its Job and pods. The caller has already decided the user may see the job.

The reads themselves are any workload's (``workloads.cluster_reads``); here the ``job_*``
functions find a job's pods and objects for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from clusters.vocabulary import JOB_ID_LABEL
from clusters.workloads import WorkloadClient
from gpujobs import manifests
from gpujobs.models import GpuJob
from workloads.cluster_reads import (
    DEFAULT_TAIL_LINES,
    MAX_TAIL_LINES,
    LogResult,
    WorkloadEvent,
    events_about,
    read_log,
)

CONTAINERS = (manifests.GPU_CONTAINER, manifests.PREPROCESS_CONTAINER)


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
    ``workloads.log_follows``). ``lines`` is None when there is nothing to follow."""
    kube = _client(job, kube)
    name, detail = _pick_pod(job, pod, kube)
    if name is None:
        return None, None, detail
    lines = kube.follow_pod_log(
        job.team.slug, name, container=container, tail_lines=max(0, min(tail, MAX_TAIL_LINES))
    )
    return name, lines, ""


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
