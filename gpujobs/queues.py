"""Kueue's queues on one cluster, as the watcher reads them every few seconds and the pages and
the API read them back: per ClusterQueue of the portal its team, kind of work, cohort, and per
GPU flavor its quota (nominal, borrowing and lending limits) and what its workloads hold; the GPU
model of each flavor; the pending workloads in the order Kueue will admit them (from Kueue's
visibility API); and whether Kueue answered.

``snapshot_fields`` turns what the cluster returned into the ``QueueSnapshot`` row's JSON (pure),
``Snapshot.from_row`` reads it back, and ``take_snapshot`` / ``record_snapshot`` are the
watcher's read of the cluster and write of the row. The row is written only when something
changed (or its time is old), so an idle cluster costs no writes.

A ClusterQueue is the portal's when it carries the portal's ownership label; its team is the
namespace its ``namespaceSelector`` picks (``kubernetes.io/metadata.name``), and its kind of work
follows from its name (``clusters.vocabulary.cluster_queue_name``). A flavor's GPU model is its
value of the cluster's GPU model node label ("" for a flavor of any GPU model).

GPUs held outside the queue: a team's bound, unfinished pods asking for GPUs that no admitted
Kueue Workload stands for (neither the pod itself nor the Job that controls it). They were made
before the cluster was switched to Kueue mode (or by hand in quota mode); the admission policies
refuse new ones, so the figure only shrinks as they end (each within its maximum run time).
Kueue does not count them: its quota is what its admitted Workloads hold. The namespace's
ResourceQuota does, so they narrow what the team's admitted jobs may still start.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.inventory import pod_gpus
from clusters.kube import ClusterUnreachable, KubeError, NotFound, ServerError
from clusters.models import Cluster
from clusters.vocabulary import (
    GPU_RESOURCE_PREFIXES,
    LOCAL_QUEUES,
    MANAGED_BY_LABEL,
    cluster_queue_name,
    cohort_tree_root,
)
from clusters.workloads import WorkloadClient
from gpujobs import manifests
from gpujobs.models import QueueSnapshot

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Pods held outside the queue named per team, at most (the count covers the rest).
NAMED_PODS_HELD_OUTSIDE = 10
BOUND_UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="
# A row whose contents did not change is still written this often, so its time says how fresh
# it is (a watcher that stopped leaves a row that grows old).
REFRESH_SECONDS = 30


def count(value: Any) -> int:
    """A whole quantity from Kueue's JSON (``8``, ``"8"``, ``"8000m"`` -> 8); 0 when unreadable."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    text = str(value or "").strip()
    scale = Decimal(1)
    if text.endswith("m"):
        text, scale = text[:-1], Decimal("0.001")
    try:
        return int(Decimal(text) * scale)
    except (InvalidOperation, ValueError):
        return 0


def _optional_count(value: Any) -> int | None:
    return None if value is None else count(value)


def is_gpu(resource: str) -> bool:
    return resource.startswith(GPU_RESOURCE_PREFIXES)


# --- what a snapshot holds ----------------------------------------------------------------------


@dataclass(frozen=True)
class FlavorFigures:
    """One ClusterQueue's GPUs of one flavor: its quota, and what its workloads hold of it
    (``used``; ``borrowed`` is the part beyond its nominal quota)."""

    nominal: int = 0
    borrowing_limit: int | None = None  # None: no limit
    lending_limit: int | None = None  # None: all of its unused quota
    used: int = 0
    borrowed: int = 0

    @property
    def own_used(self) -> int:
        return self.used - self.borrowed

    @property
    def unused(self) -> int:
        return max(self.nominal - self.own_used, 0)

    @property
    def lendable(self) -> int:
        """Unused quota the others may borrow."""
        if self.lending_limit is None:
            return self.unused
        return min(self.unused, self.lending_limit)


@dataclass(frozen=True)
class QueueFigures:
    """One ClusterQueue: whose it is, its cohort, its GPU flavors, its workloads' counts, and
    why it admits nothing when Kueue says it is inactive.

    The cohort of a queue in a department's cohort is the root of the portal's tree: every
    department's teams share through it, so what is idle, lent and queued is counted over the
    whole tree, as it was over the single cohort before departments had cohorts."""

    name: str
    team: str = ""
    kind: str = ""  # guaranteed / opportunistic; "" for a queue not made by the portal's rules
    cohort: str = ""
    flavors: dict[str, FlavorFigures] = field(default_factory=dict)
    pending: int = 0
    admitted: int = 0
    inactive: str = ""


@dataclass(frozen=True)
class PendingWorkload:
    """A pending workload in Kueue's order: its ClusterQueue and 0-based position there, its
    LocalQueue, and the portal's job (by namespace and id) when it is one."""

    cluster_queue: str
    position: int
    namespace: str
    local_queue: str = ""
    local_position: int = 0
    job_id: int | None = None
    priority: int = 0
    created: str = ""


@dataclass(frozen=True)
class HeldOutside:
    """A team's GPUs held by pods Kueue did not admit: how many GPUs, by how many pods, and
    the names of the first few of them."""

    gpus: int = 0
    pods: int = 0
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    taken_at: datetime.datetime | None = None
    flavors: dict[str, str] = field(default_factory=dict)  # GPU flavor -> model ("" any)
    cluster_queues: dict[str, QueueFigures] = field(default_factory=dict)
    pending: tuple[PendingWorkload, ...] = ()
    kueue_error: str = ""
    kueue_error_since: datetime.datetime | None = None
    held_outside: dict[str, HeldOutside] = field(default_factory=dict)  # team slug -> GPUs

    @classmethod
    def from_row(cls, row: QueueSnapshot | None) -> Snapshot:
        if row is None:
            return cls()
        queues = {}
        for item in row.cluster_queues or []:
            flavors = {
                name: FlavorFigures(**figures)
                for name, figures in (item.get("flavors") or {}).items()
            }
            queues[item["name"]] = QueueFigures(**{**item, "flavors": flavors})
        return cls(
            taken_at=row.taken_at,
            flavors=dict(row.flavors or {}),
            cluster_queues=queues,
            pending=tuple(PendingWorkload(**item) for item in row.pending or []),
            kueue_error=row.kueue_error,
            kueue_error_since=row.kueue_error_since,
            held_outside={
                team: HeldOutside(gpus=held["gpus"], pods=held["pods"], names=tuple(held["names"]))
                for team, held in (row.held_outside or {}).items()
            },
        )

    def team_queue(self, slug: str, kind: str) -> QueueFigures | None:
        for queue in self.cluster_queues.values():
            if queue.team == slug and queue.kind == kind:
                return queue
        return None

    def cohort_of(self, slug: str) -> str:
        for queue in self.cluster_queues.values():
            if queue.team == slug and queue.cohort:
                return queue.cohort
        return ""

    def in_cohort(self, cohort: str) -> list[QueueFigures]:
        return [q for q in self.cluster_queues.values() if cohort and q.cohort == cohort]


# --- from the cluster's JSON --------------------------------------------------------------------


def _team_and_kind(cq: dict, *, portal_name: str) -> tuple[str, str]:
    spec = cq.get("spec") or {}
    slug = ((spec.get("namespaceSelector") or {}).get("matchLabels") or {}).get(
        NAMESPACE_NAME_LABEL, ""
    )
    name = (cq.get("metadata") or {}).get("name") or ""
    for kind in LOCAL_QUEUES:
        if slug and name == cluster_queue_name(portal_name, slug, kind):
            return slug, kind
    return slug, ""


def _usage(cq: dict) -> dict[tuple[str, str], tuple[int, int]]:
    """(flavor, resource) -> (used, borrowed), from the quota the queue's workloads reserve."""
    status = cq.get("status") or {}
    usage = {}
    for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            usage[(flavor.get("name") or "", resource.get("name") or "")] = (
                count(resource.get("total")),
                count(resource.get("borrowed")),
            )
    return usage


def queue_figures(cq: dict, *, portal_name: str) -> tuple[QueueFigures, set[str]]:
    """A ClusterQueue's figures, and the flavors it gives GPUs of."""
    spec = cq.get("spec") or {}
    status = cq.get("status") or {}
    usage = _usage(cq)
    flavors: dict[str, FlavorFigures] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            name = flavor.get("name") or ""
            for resource in flavor.get("resources") or []:
                if not is_gpu(resource.get("name") or ""):
                    continue
                used, borrowed = usage.get((name, resource["name"]), (0, 0))
                flavors[name] = FlavorFigures(
                    nominal=count(resource.get("nominalQuota")),
                    borrowing_limit=_optional_count(resource.get("borrowingLimit")),
                    lending_limit=_optional_count(resource.get("lendingLimit")),
                    used=used,
                    borrowed=borrowed,
                )
    inactive = ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Active" and condition.get("status") == "False":
            inactive = (condition.get("message") or condition.get("reason") or "").strip()
    team, kind = _team_and_kind(cq, portal_name=portal_name)
    figures = QueueFigures(
        name=(cq.get("metadata") or {}).get("name") or "",
        team=team,
        kind=kind,
        cohort=cohort_tree_root(portal_name, spec.get("cohortName") or spec.get("cohort") or ""),
        flavors=flavors,
        pending=count(status.get("pendingWorkloads")),
        admitted=count(status.get("admittedWorkloads")),
        inactive=inactive,
    )
    return figures, set(flavors)


def pending_workload(item: dict, *, cluster_queue: str) -> dict:
    metadata = item.get("metadata") or {}
    owner = next((o for o in metadata.get("ownerReferences") or [] if o.get("kind") == "Job"), {})
    return {
        "cluster_queue": cluster_queue,
        "position": count(item.get("positionInClusterQueue")),
        "namespace": metadata.get("namespace") or "",
        "local_queue": item.get("localQueueName") or "",
        "local_position": count(item.get("positionInLocalQueue")),
        "job_id": manifests.job_id_from_name(owner.get("name") or ""),
        "priority": count(item.get("priority")),
        "created": metadata.get("creationTimestamp") or "",
    }


def gpu_pod_holding(pod: dict) -> dict | None:
    """What a snapshot keeps of a bound, unfinished pod asking for GPUs (any GPU resource:
    whole, MIG profile, shared): its namespace, name, uid, its controller's uid and its GPUs.
    None for any other pod: a long list keeps only these."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in (
        "Succeeded",
        "Failed",
    ):
        return None
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    names = sorted(
        {
            name
            for container in containers
            for kind in ("limits", "requests")
            for name in ((container.get("resources") or {}).get(kind) or {})
            if is_gpu(name)
        }
    )
    gpus = sum(pod_gpus(pod, names).values()) if names else 0
    if not gpus:
        return None
    metadata = pod.get("metadata") or {}
    controller = next(
        (o.get("uid") or "" for o in metadata.get("ownerReferences") or [] if o.get("controller")),
        "",
    )
    return {
        "namespace": metadata.get("namespace") or "",
        "name": metadata.get("name") or "",
        "uid": metadata.get("uid") or "",
        "controller": controller,
        "gpus": gpus,
    }


def admitted_owners(workload: dict) -> list[str]:
    """The uids of what an admitted (or quota-reserving) Workload stands for: its Job, or its
    pods; none when Kueue has not admitted it."""
    conditions = (workload.get("status") or {}).get("conditions") or []
    if not any(
        c.get("type") in ("Admitted", "QuotaReserved") and c.get("status") == "True"
        for c in conditions
    ):
        return []
    owners = (workload.get("metadata") or {}).get("ownerReferences") or []
    return [o["uid"] for o in owners if o.get("uid")]


def held_outside(pods: list[dict], admitted: set[str], *, teams: set[str]) -> dict[str, dict]:
    """Per team (its namespace), the GPUs its pods hold that no admitted Workload stands for.
    ``pods``: ``gpu_pod_holding``'s; ``admitted``: the uids admitted Workloads own."""
    held: dict[str, dict] = {}
    for pod in sorted(pods, key=lambda p: (p["namespace"], p["name"])):
        if pod["namespace"] not in teams or admitted & {pod["uid"], pod["controller"]}:
            continue
        team = held.setdefault(pod["namespace"], {"gpus": 0, "pods": 0, "names": []})
        team["gpus"] += pod["gpus"]
        team["pods"] += 1
        if len(team["names"]) < NAMED_PODS_HELD_OUTSIDE:
            team["names"].append(pod["name"])
    return {team: held[team] for team in sorted(held)}


def snapshot_fields(
    *,
    cluster_queues: list[dict],
    resource_flavors: list[dict],
    pending: dict[str, list[dict]],
    portal_name: str,
    gpu_model_label: str,
    kueue_error: str = "",
    gpu_pods: list[dict] = (),
    admitted: set[str] = frozenset(),
) -> dict:
    """The ``QueueSnapshot`` fields (JSON) for what the cluster returned: the portal's
    ClusterQueues, every ResourceFlavor, each ClusterQueue's pending workloads, and the bound
    GPU pods (``gpu_pod_holding``'s) with the uids admitted Workloads own."""
    queues, gpu_flavors = [], set()
    for cq in sorted(cluster_queues, key=lambda c: (c.get("metadata") or {}).get("name") or ""):
        figures, names = queue_figures(cq, portal_name=portal_name)
        gpu_flavors |= names
        queues.append(
            {
                "name": figures.name,
                "team": figures.team,
                "kind": figures.kind,
                "cohort": figures.cohort,
                "flavors": {
                    name: vars(figures.flavors[name]).copy() for name in sorted(figures.flavors)
                },
                "pending": figures.pending,
                "admitted": figures.admitted,
                "inactive": figures.inactive,
            }
        )
    models = {}
    for flavor in resource_flavors:
        name = (flavor.get("metadata") or {}).get("name") or ""
        if name in gpu_flavors:
            labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
            models[name] = labels.get(gpu_model_label, "")
    waiting = [
        pending_workload(item, cluster_queue=name)
        for name in sorted(pending)
        for item in pending[name]
    ]
    return {
        "flavors": {name: models.get(name, "") for name in sorted(gpu_flavors)},
        "cluster_queues": queues,
        "pending": waiting,
        "kueue_error": kueue_error,
        "held_outside": held_outside(
            list(gpu_pods), set(admitted), teams={q["team"] for q in queues if q["team"]}
        ),
    }


# --- the watcher's read and write ----------------------------------------------------------------


def kueue_not_answering(cluster_name: str, error: KubeError) -> str:
    return (
        f"Kueue on cluster {cluster_name} is not admitting: it does not answer ({error}). Jobs "
        "wait where they are (suspended in their queues, or in the portal) until it is back."
    )


def take_snapshot(cluster: Cluster, *, kube: WorkloadClient, portal_name: str) -> dict:
    """Read the cluster's queues (one list of the portal's ClusterQueues, one of the
    ResourceFlavors, and the pending workloads of each ClusterQueue that has some) and what
    the teams hold outside them (one list of the bound, unfinished pods, kept only when they
    ask for GPUs, and one of the Workloads) into ``QueueSnapshot`` fields. Kueue answers the
    pending workloads itself, so while it is down they fail: the fields then say so
    (``kueue_error``), with the last positions gone. Listing the queues, pods and Workloads
    is the API server's, and errors there are raised."""
    selector = f"{MANAGED_BY_LABEL}={portal_name}"
    cluster_queues = kube.list_objects("ClusterQueue", label_selector=selector).items
    resource_flavors = kube.list_objects("ResourceFlavor").items
    pending: dict[str, list[dict]] = {}
    error = ""
    waiting = [
        cq["metadata"]["name"]
        for cq in cluster_queues
        if count((cq.get("status") or {}).get("pendingWorkloads"))
    ]
    # With nothing pending, one ClusterQueue is asked anyway: whether Kueue answers.
    asked = waiting or [cq["metadata"]["name"] for cq in cluster_queues[:1]]
    try:
        for name in asked:
            try:
                pending[name] = kube.pending_workloads(name, limit=1000 if name in waiting else 1)
            except NotFound:
                continue  # deleted since it was listed
    except (ServerError, ClusterUnreachable) as failure:
        pending, error = {}, kueue_not_answering(cluster.name, failure)
    pending = {name: items for name, items in pending.items() if name in waiting}
    gpu_pods = kube.list_objects(
        "Pod", field_selector=BOUND_UNFINISHED_PODS, keep=gpu_pod_holding
    ).items
    admitted = kube.list_objects("Workload", keep=admitted_owners).items
    return snapshot_fields(
        cluster_queues=cluster_queues,
        resource_flavors=resource_flavors,
        pending=pending,
        portal_name=portal_name,
        gpu_model_label=cluster.gpu_model_label,
        kueue_error=error,
        gpu_pods=[pod for pod in gpu_pods if pod is not None],
        admitted={uid for owners in admitted for uid in owners},
    )


def record_snapshot(cluster_id: int, fields: dict, *, now: datetime.datetime | None = None) -> bool:
    """Write the cluster's snapshot when it changed (or is old); returns whether it wrote."""
    now = now or timezone.now()
    with transaction.atomic():
        row = QueueSnapshot.objects.select_for_update().filter(cluster_id=cluster_id).first()
        if row is None:
            QueueSnapshot.objects.create(
                cluster_id=cluster_id,
                taken_at=now,
                kueue_error_since=now if fields["kueue_error"] else None,
                **fields,
            )
            return True
        same = all(getattr(row, name) == value for name, value in fields.items())
        if same and (now - row.taken_at).total_seconds() < REFRESH_SECONDS:
            return False
        since = row.kueue_error_since if row.kueue_error else now
        for name, value in fields.items():
            setattr(row, name, value)
        row.taken_at = now
        row.kueue_error_since = since if fields["kueue_error"] else None
        row.save()
        return True
