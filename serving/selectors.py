"""Reads: which services a user may see, what a team's services hold of its GPU quota, and which
services the reconcile sweep and the watcher's resync follow."""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Prefetch, QuerySet
from django.urls import reverse

from clusters.kube import connection_configured
from clusters.models import Cluster
from serving import traffic
from serving.models import InferenceService, Revision
from tenants.impact import Work
from tenants.models import Team
from tenants.permissions import is_portal_admin

Service = InferenceService
LIVE = (Service.State.ACTIVE, Service.State.STOPPED)


def services_visible_to(user: User | AnonymousUser) -> QuerySet[InferenceService]:
    """Admins see every service; everyone else the services of the teams they belong to."""
    services = Service.objects.select_related("team", "cluster", "created_by")
    if is_portal_admin(user):
        return services
    if not user.is_authenticated:
        return services.none()
    return services.filter(team__memberships__user=user)


def live_revisions(service: InferenceService) -> list[Revision]:
    """The revisions it runs, stable first."""
    revisions = [r for r in service.revisions.all() if r.role != Revision.Role.RETIRED]
    return sorted(revisions, key=lambda r: (r.role != Revision.Role.STABLE, r.number))


def routing_of(cluster: Cluster) -> str:
    """How the cluster splits traffic: HTTPRoute weights when it serves the Gateway API (as
    last detected), replica counts otherwise."""
    return traffic.GATEWAY_API if cluster.gateway_api else traffic.REPLICAS


def service_routing(service: InferenceService) -> str:
    """How the service's traffic is split: as its last pass applied it, or the cluster's."""
    return service.routing or routing_of(service.cluster)


def gpus_by_resource(revisions, *, routing: str, stopped: bool = False) -> dict[str, int]:
    """GPUs the revisions' planned replicas ask for, per GPU kind."""
    replicas = traffic.replicas_by_revision(revisions, routing=routing, stopped=stopped)
    held: dict[str, int] = defaultdict(int)
    for revision in revisions:
        held[revision.gpu_resource] += replicas[revision.number] * revision.gpus
    return dict(held)


def gpus_held_by_services(*, team: Team, cluster: Cluster, gpu_resource: str) -> int:
    """GPUs of a kind the team's active services on the cluster ask for: replicas x GPUs of
    every live revision (what ``workloads.holdings`` adds to the jobs' for the quota check)."""
    services = Service.objects.filter(
        team=team, cluster=cluster, state=Service.State.ACTIVE
    ).prefetch_related(
        Prefetch("revisions", queryset=Revision.objects.exclude(role=Revision.Role.RETIRED))
    )
    total = 0
    for service in services:
        service.cluster = cluster
        held = gpus_by_resource(list(service.revisions.all()), routing=service_routing(service))
        total += held.get(gpu_resource, 0)
    return total


def clusters_with_services() -> list[Cluster]:
    """Clusters the portal can reach that have services on them (or being removed)."""
    ids = (
        Service.objects.exclude(state=Service.State.DELETED)
        .values_list("cluster_id", flat=True)
        .distinct()
    )
    return [c for c in Cluster.objects.filter(pk__in=list(ids)) if connection_configured(c)]


def services_to_reconcile() -> list[int]:
    """Every service whose objects the periodic sweep brings in line (or removes)."""
    return list(
        Service.objects.exclude(state=Service.State.DELETED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def followed_revisions(*, cluster_id: int) -> dict[tuple[str, int, int], int]:
    """(namespace, service id, revision number) -> revision id, of the cluster's services that
    are not deleted: what the watcher records observations for."""
    rows = Revision.objects.filter(service__cluster_id=cluster_id).exclude(
        service__state=Service.State.DELETED
    )
    return {
        (slug, service_id, number): pk
        for pk, slug, service_id, number in rows.values_list(
            "pk", "service__team__slug", "service_id", "number"
        )
    }


def services_for_impact(*, team: Team, cluster: Cluster, gpu_resource: str) -> list[Work]:
    """The team's active services holding GPUs of a kind on the cluster, as a grant change's
    impact preview counts them (``tenants.impact``): one item per service and GPU model its
    live revisions ask for (replicas x GPUs), in two queries."""
    services = Service.objects.filter(
        team=team, cluster=cluster, state=Service.State.ACTIVE
    ).prefetch_related(
        Prefetch("revisions", queryset=Revision.objects.exclude(role=Revision.Role.RETIRED))
    )
    work = []
    for service in services.order_by("pk"):
        service.cluster = cluster
        revisions = list(service.revisions.all())
        replicas = traffic.replicas_by_revision(revisions, routing=service_routing(service))
        by_model: dict[str, int] = defaultdict(int)
        for revision in revisions:
            if revision.gpu_resource == gpu_resource:
                by_model[revision.gpu_model] += replicas[revision.number] * revision.gpus
        work += [
            Work(
                kind="service",
                id=service.pk,
                name=service.name,
                gpus=gpus,
                gpu_model=model,
                since=service.created_at,
                running=True,
                url=reverse("service-detail", args=[service.pk]),
            )
            for model, gpus in sorted(by_model.items())
            if gpus
        ]
    return work
