"""Stopping a pod the portal created, the one delete monitoring's idle policy may do.

The pod's owning Job is deleted when a Job owns it (deleting only the pod would make the Job
start another), else the pod itself, only that very object (by uid), and only when it carries
the portal's managed-by label. ``stop_target``, which decides what to delete, is pure and
tested without a cluster; the rest goes through ``clusters.workloads``.

A pod of a workload that is neither a Job nor a bare pod (an inference service's replica, whose
ReplicaSet would only start another) is stopped through its workload: the app that runs it
registers the label naming the workload and how to stop it (``register_stopper``; the serving
app scales the service to zero through the portal, so its reconcile does not start it again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from clusters.models import Cluster
from clusters.vocabulary import MANAGED_BY_LABEL
from clusters.workloads import WorkloadClient


class StopRefused(Exception):
    """The pod is not the portal's to stop (or is already gone)."""


@dataclass(frozen=True)
class Stopper:
    """How to stop a workload the idle policy finds idle, by its pods' ``label``: ``stop(
    cluster, namespace, value of the label)`` (raises ``StopRefused``)."""

    label: str
    kind: str
    stop: Callable[[Cluster, str, str], None]


_stoppers: dict[str, Stopper] = {}


def register_stopper(*, label: str, kind: str, stop: Callable[[Cluster, str, str], None]) -> None:
    """Stop pods carrying ``label`` through their workload (``kind``) instead of deleting them."""
    _stoppers[kind] = Stopper(label=label, kind=kind, stop=stop)


@dataclass(frozen=True)
class Stopped:
    """What was (or would be) deleted to stop a pod: its owning Job, or the pod itself."""

    kind: str
    name: str
    uid: str = ""


def stop_target(pod: dict, *, managed_by: str) -> Stopped:
    """What to stop this pod by: the workload a registered stopper stops through the portal
    (a service, a session, whatever makes its pods), else its Job when a Job owns it (deleting
    only the pod would make the Job start another), else the pod. Refuses pods without the
    portal's label."""
    metadata = pod.get("metadata") or {}
    if (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != managed_by:
        raise StopRefused(
            f"Pod {metadata.get('name')} is not labelled {MANAGED_BY_LABEL}={managed_by}; "
            "the portal only stops what it created."
        )
    labels = metadata.get("labels") or {}
    for stopper in _stoppers.values():
        if labels.get(stopper.label):
            return Stopped(kind=stopper.kind, name=labels[stopper.label])
    for owner in metadata.get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("apiVersion", "").startswith("batch/"):
            return Stopped(kind="Job", name=owner["name"], uid=owner.get("uid", ""))
    return Stopped(kind="Pod", name=metadata["name"], uid=metadata.get("uid", ""))


def check_stoppable(
    cluster: Cluster, *, namespace: str, pod: str, kube: WorkloadClient | None = None
) -> Stopped:
    """What ``stop_managed_pod`` would delete; ``StopRefused`` when it would refuse, and
    ``KubeError`` when the cluster cannot say."""
    kube = kube or WorkloadClient.for_cluster(cluster)
    body = kube.get_pod(namespace, pod)
    if body is None:
        raise StopRefused(f"Pod {namespace}/{pod} no longer exists.")
    target = stop_target(body, managed_by=settings.PORTAL_NAME)
    if target.kind == "Job":
        job = kube.get_job(namespace, target.name)
        labels = ((job or {}).get("metadata") or {}).get("labels") or {}
        if job is None or labels.get(MANAGED_BY_LABEL) != settings.PORTAL_NAME:
            raise StopRefused(f"Job {namespace}/{target.name} is not managed by the portal.")
    return target


def stop_managed_pod(cluster: Cluster, *, namespace: str, pod: str) -> Stopped:
    """Stop a pod the portal manages by deleting its Job (and with it the pod) or the pod
    itself, only that very object (by uid). Anything else is refused with ``StopRefused``."""
    kube = WorkloadClient.for_cluster(cluster)
    target = check_stoppable(cluster, namespace=namespace, pod=pod, kube=kube)
    if target.kind in _stoppers:
        _stoppers[target.kind].stop(cluster, namespace, target.name)
        return target
    if target.kind == "Job":
        deleted = kube.delete_job(
            namespace, target.name, propagation="Background", uid=target.uid or None
        )
    else:
        deleted = kube.delete_pod(namespace, target.name, uid=target.uid or None)
    if not deleted:
        raise StopRefused(f"{target.kind} {namespace}/{target.name} was already gone.")
    return target
