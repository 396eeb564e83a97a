"""Reads from the cluster about one service, for its page and the API: a replica's log and the
events of its objects and pods. The caller has already decided the user may see the service.

Built on the reads every workload shares (``gpujobs.cluster_reads``: a pod's log, events about
named objects); this module finds which pods and objects are the service's: those carrying its
labels, listed now, and the pods its revisions' rows last recorded.
"""

from __future__ import annotations

from django.conf import settings

from clusters.workloads import WorkloadClient
from serving import manifests
from serving.models import InferenceService
from workloads.cluster_reads import (
    DEFAULT_TAIL_LINES,
    LogResult,
    WorkloadEvent,
    events_about,
    read_log,
)

CONTAINERS = manifests.CONTAINERS


def _client(service: InferenceService, kube: WorkloadClient | None) -> WorkloadClient:
    return kube or WorkloadClient.for_cluster(service.cluster)


def service_pods(
    service: InferenceService, *, kube: WorkloadClient | None = None, revision: int | None = None
) -> list[dict]:
    """The service's pods on the cluster now (of one revision, if given), oldest first."""
    selector = manifests.ownership_selector(settings.PORTAL_NAME, service.pk)
    if revision is not None:
        selector += f",{manifests.REVISION_LABEL}={revision}"
    pods = _client(service, kube).list_objects(
        "Pod", namespace=service.team.slug, label_selector=selector
    )
    return sorted(
        pods.items,
        key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]),
    )


def replica_log(
    service: InferenceService,
    *,
    pod: str | None = None,
    container: str = manifests.SERVER_CONTAINER,
    tail: int = DEFAULT_TAIL_LINES,
    kube: WorkloadClient | None = None,
) -> LogResult:
    """The last ``tail`` lines of a container's log in one of the service's replicas (``pod``,
    else its newest)."""
    kube = _client(service, kube)
    names = [p["metadata"]["name"] for p in service_pods(service, kube=kube)]
    if pod and pod not in names:
        return LogResult(
            pod=None, container=container, text="", detail=f"{pod} is not a replica of it now."
        )
    if not names:
        return LogResult(
            pod=None, container=container, text="", detail="The service has no replica now."
        )
    name = pod or names[-1]
    return read_log(kube, namespace=service.team.slug, pod=name, container=container, tail=tail)


def service_events(
    service: InferenceService, *, kube: WorkloadClient | None = None
) -> list[WorkloadEvent]:
    """Events about the service's Deployments, ReplicaSets, pods, Services and HTTPRoute,
    oldest first."""
    kube = _client(service, kube)
    selector = manifests.ownership_selector(settings.PORTAL_NAME, service.pk)
    namespace = service.team.slug
    names: set[tuple[str, str]] = {("Service", service.name), ("HTTPRoute", service.name)}
    for revision in service.revisions.all():
        name = manifests.revision_object_name(service.name, revision.number)
        names |= {("Deployment", name), ("Service", name)}
        names |= {("Pod", pod) for pod in revision.pods or []}
    for kind in ("ReplicaSet", "Pod"):
        listing = kube.list_objects(kind, namespace=namespace, label_selector=selector)
        names |= {(kind, item["metadata"]["name"]) for item in listing.items}
    return events_about(kube, namespace=namespace, about=lambda kind, name: (kind, name) in names)
