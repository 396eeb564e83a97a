"""Bring one service's objects on its cluster in line with its rows, and say how it went.

Level-triggered, as a team's reconcile is (``reconcile.team_pass``): a pass
reads the service and its live revisions as they are now, builds the objects they should have
(``serving.manifests``, a pure function), lists what the cluster holds under the service's
labels, applies with server-side apply (one field manager, taking back fields someone changed
by hand) only what differs, and deletes what the service owns but no longer wants (a retired
revision's Deployment and Service, an HTTPRoute once the Gateway API is gone). A pass over an
unchanged cluster makes reads only. The periodic sweep (``tasks.reconcile_services``) runs one
for every service, so hand edits of the portal's fields are repaired. What every pass shares
(the outcome, the advisory lock, recording it) comes from ``reconcile.passes``.

Each pass asks the API's discovery whether the cluster serves the Gateway API's HTTPRoute and
records it on the cluster (``Cluster.gateway_api``): with it, traffic is split by HTTPRoute
weights; without it, by replica counts behind one Service (``serving.traffic``). When that
changes, every other service on the cluster is reconciled too.

A service being deleted has its objects deleted, and is marked deleted only once a list finds
nothing of it left (no Deployment, ReplicaSet, pod, Service or HTTPRoute); until then the pass
raises a transient error, and the task tries again.

Passes over one service are serialised by a PostgreSQL advisory lock taken before the rows are
read, so a pass that started from older rows never overwrites what a later one applied.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.kube import (
    KubeClient,
    KubeError,
    NotOwned,
    TransientKubeError,
    describe,
)
from clusters.models import Cluster
from clusters.vocabulary import MANAGED_BY_LABEL, SERVICE_ID_LABEL, TEAM_LABEL
from clusters.workloads import WorkloadClient
from reconcile import manifests as team_manifests
from reconcile.namespaces import NamespaceNotOwned, check_namespace_owned
from reconcile.passes import Outcome, each, finish, lock, record
from serving import manifests, reconcile_triggers, traffic
from serving.models import InferenceService

logger = logging.getLogger(__name__)

ADVISORY_LOCK_CLASS = 0x7376  # "sv"
# What a service is made of on the cluster (HTTPRoutes only where the Gateway API is served),
# and what is left of it while it is being deleted.
APPLIED_KINDS = ("Deployment", "Service")
LEFTOVER_WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "Pod")

Service = InferenceService


class StillBeingRemoved(TransientKubeError):
    """A deleted service's objects are not all gone yet (the garbage collector removes its
    ReplicaSets and pods after its Deployments): the pass is tried again."""


class TakenByAnotherService(TransientKubeError):
    """An object of the name the service wants belongs to another service of the portal's, one
    deleted a moment ago whose objects are still going: tried again until it is gone."""


def detect_gateway_api(kube: KubeClient, cluster: Cluster) -> bool:
    """Whether the cluster serves HTTPRoutes, recorded on its row; when that changed, every
    other service on it is reconciled too (after commit)."""
    served = kube.serves("HTTPRoute")
    if Cluster.objects.filter(pk=cluster.pk).exclude(gateway_api=served).update(gateway_api=served):
        logger.info("cluster %s serves the Gateway API: %s", cluster.name, served)
        others = (
            Service.objects.filter(cluster=cluster)
            .exclude(state=Service.State.DELETED)
            .values_list("pk", flat=True)
        )
        for service_id in others:
            reconcile_triggers.request_after_commit(service_id=service_id)
    cluster.gateway_api = served
    return served


def _owned_by(obj: dict, service: InferenceService) -> bool:
    found = (obj.get("metadata") or {}).get("labels") or {}
    return (
        found.get(MANAGED_BY_LABEL) == settings.PORTAL_NAME
        and found.get(TEAM_LABEL) == service.team.slug
        and found.get(SERVICE_ID_LABEL) == str(service.pk)
    )


def sync(
    kube: KubeClient, desired: list[dict], *, service: InferenceService, gateway: bool
) -> Outcome:
    """Make the cluster hold ``desired`` for the service, touching only the service's own
    objects. Raises ``NotOwned`` when an object of a name it wants was made by someone else."""
    outcome = Outcome()
    namespace = service.team.slug
    selector = manifests.ownership_selector(settings.PORTAL_NAME, service.pk)
    kinds = [*APPLIED_KINDS, *(("HTTPRoute",) if gateway else ())]
    live: dict[tuple, dict] = {}
    for items in each(
        lambda kind: kube.list(kind, namespace=namespace, label_selector=selector), kinds
    ):
        for obj in items:
            if _owned_by(obj, service):
                live[team_manifests.object_key(obj)] = obj

    def ensure(obj: dict) -> str | None:
        key = team_manifests.object_key(obj)
        kind, obj_namespace, name = key
        current = live.get(key)
        if current is None:
            # Not among the service's objects: make sure nobody else's has the name.
            found = kube.get(kind, name, obj_namespace)
            if found is not None:
                labels = (found.get("metadata") or {}).get("labels") or {}
                where = describe(kind, name, obj_namespace)
                if labels.get(MANAGED_BY_LABEL) != settings.PORTAL_NAME:
                    raise NotOwned(
                        f"{where} on cluster {kube.cluster_name} was not created by the portal, "
                        f"so the portal leaves it alone. Delete it, or deploy service "
                        f"{service.name} under another name."
                    )
                raise TakenByAnotherService(
                    f"{where} on cluster {kube.cluster_name} belongs to another service "
                    "(one deleted a moment ago whose objects are still going); trying again."
                )
        elif team_manifests.matches(obj, current):
            return None
        kube.apply(obj)
        return describe(kind, name, obj_namespace)

    outcome.applied = [what for what in each(ensure, desired) if what]
    wanted = {team_manifests.object_key(obj) for obj in desired}
    unwanted = [
        obj
        for key, obj in live.items()
        if key not in wanted and not obj["metadata"].get("deletionTimestamp")
    ]

    def prune(obj: dict) -> str:
        kind, obj_namespace, name = team_manifests.object_key(obj)
        kube.delete(kind, name, obj_namespace, uid=obj["metadata"].get("uid"))
        return describe(kind, name, obj_namespace)

    outcome.deleted = each(prune, unwanted)
    return outcome


def leftovers(kube: WorkloadClient, *, service: InferenceService, gateway: bool) -> list[str]:
    """What of the service is still on the cluster: its objects, ReplicaSets and pods."""
    namespace = service.team.slug
    selector = manifests.ownership_selector(settings.PORTAL_NAME, service.pk)
    found = []
    for kind in LEFTOVER_WORKLOAD_KINDS:
        items = kube.list_objects(kind, namespace=namespace, label_selector=selector).items
        found += [f"{kind} {item['metadata']['name']}" for item in items]
    for kind in ("Service", *(("HTTPRoute",) if gateway else ())):
        items = kube.list(kind, namespace=namespace, label_selector=selector)
        found += [f"{kind} {item['metadata']['name']}" for item in items]
    return found


def remove(kube: WorkloadClient, *, service: InferenceService, gateway: bool) -> Outcome:
    """Delete the service's objects; raises ``StillBeingRemoved`` until nothing is left."""
    try:
        check_namespace_owned(kube, slug=service.team.slug)
    except NamespaceNotOwned:
        return Outcome()  # someone else's namespace: the portal made nothing there
    outcome = sync(kube, [], service=service, gateway=gateway)
    left = leftovers(kube, service=service, gateway=gateway)
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        raise StillBeingRemoved(
            f"Service {service.name} is being removed from cluster {kube.cluster_name}: "
            f"{shown} still there; checking again."
        )
    return outcome


def reconcile_service(*, service_id: int, kube: WorkloadClient | None = None) -> Outcome:
    """One pass over the service, its outcome recorded on its row. Raises the ``KubeError``
    when the pass failed (after recording it), so the task can retry transient ones."""
    started = timezone.now()
    with transaction.atomic():
        if not Service.objects.filter(pk=service_id).exists():
            return Outcome()
        lock(service_id, lock_class=ADVISORY_LOCK_CLASS)
        service = Service.objects.select_related("team", "cluster").get(pk=service_id)
        if service.state == Service.State.DELETED:
            return Outcome()
        error: KubeError | None = None
        outcome = Outcome()
        changes: dict = {}
        try:
            client = kube or WorkloadClient.for_cluster(service.cluster)
            reads, writes = client.reads, client.writes
            try:
                gateway = detect_gateway_api(client, service.cluster)
                if service.state == Service.State.DELETING:
                    outcome = remove(client, service=service, gateway=gateway)
                    changes.update(state=Service.State.DELETED, deleted_at=timezone.now())
                else:
                    check_namespace_owned(client, slug=service.team.slug)
                    routing = traffic.GATEWAY_API if gateway else traffic.REPLICAS
                    spec = manifests.stored_spec(
                        service, routing=routing, gateway=settings.SERVING_GATEWAY
                    )
                    desired = manifests.service_objects(spec)
                    outcome = sync(client, desired, service=service, gateway=gateway)
                    changes["routing"] = routing
            finally:
                outcome.reads, outcome.writes = client.reads - reads, client.writes - writes
        except KubeError as failure:
            error = failure
            changes = {}
        record(service, outcome=outcome, error=error, started=started, changes=changes)
    return finish(outcome, error, what=f"service {service.name} ({service.team.slug})")
