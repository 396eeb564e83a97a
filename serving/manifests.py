"""An inference service as the objects the cluster runs: a pure function of its stored state
(``ServiceSpec``) and the cluster's GPU placement rules. No database, no network;
``stored_spec`` only reads a service's rows.

What the cluster gets:

* one Deployment per live revision (``<name>-r<number>``), its replicas from ``traffic.plan``.
  Its pods take the placement every GPU workload gets (``gpujobs.manifests``): the GPU node
  affinity (and the GPU model when one was chosen) and the GPU taint's toleration, the GPUs as
  limits on the model server's container only. The optional sidecar asks for no GPU and gets
  ``NVIDIA_VISIBLE_DEVICES=void`` (``hide_gpus``), as a job's preprocessing container does, so the
  NVIDIA runtime hands it none of the node's GPUs. The model server's port is named ``http`` and
  its readiness probe (an HTTP GET or a TCP connect) decides when a replica takes traffic. A
  revision's spec never changes, so its Deployment never rolls; should a new builder change a
  template, ``maxSurge: 0`` keeps the rollout inside the GPUs the service holds.
* one Service (``<name>``) selecting the pods of every live revision: in-cluster clients' one
  address. Without the Gateway API it is the traffic split, by replica counts.
* with the Gateway API: a Service per live revision (``<name>-r<number>``) and an HTTPRoute
  (``<name>``) for the hostname ``<name>.<team>.<the cluster's apps domain>`` only, whose
  backend weights are the revisions' weights (attached to the cluster's
  gateway when the portal is told of one: ``SERVING_GATEWAY``).

On a cluster whose quota Kueue enforces (``ServiceSpec.queue``), each Deployment and its pods
carry the team's guaranteed LocalQueue and priority class: Kueue's pod integration holds each
replica at its scheduling gate until the team's queue admits it, so a service counts in the
queue beside the team's jobs (the cluster refuses GPU pods that go around the queues).

Every object carries the portal's ownership label, the team label and the service-id label (a
revision's also the revision label), so the reconcile and the watcher find them with one label
selector, and a hash of what was applied, so a field the portal stops setting counts as a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusters.vocabulary import (
    DEFAULT_APPS_DOMAIN,
    GATEWAY_API_VERSION,
    GUARANTEED,
    MANAGED_BY_LABEL,
    REVISION_LABEL,
    SERVICE_ID_LABEL,
    TEAM_LABEL,
    team_domain,
)
from reconcile.manifests import with_hash
from serving import traffic
from serving.specs import ProbeKind, RevisionRequest
from workloads import manifests as pods

if TYPE_CHECKING:
    from serving.models import InferenceService

SERVER_CONTAINER = "server"
SIDECAR_CONTAINER = "sidecar"
CONTAINERS = (SERVER_CONTAINER, SIDECAR_CONTAINER)
PORT_NAME = "http"
PROBE_PERIOD_SECONDS = 10
PROBE_FAILURE_THRESHOLD = 3
# One ReplicaSet is all a revision's Deployment ever has: its template never changes.
REVISION_HISTORY_LIMIT = 1


@dataclass(frozen=True)
class RevisionSpec:
    """A live revision as the builder takes it: its number, spec, replicas and weight (%)."""

    number: int
    request: RevisionRequest
    replicas: int
    weight: int
    role: str = "stable"
    # Whether the watcher has seen a replica of it ready: a revision without one takes no
    # traffic through the route while another has one (``route_weights``).
    ready: bool = True

    @property
    def gpus(self) -> int:
        return self.request.gpus


@dataclass(frozen=True)
class ServiceSpec:
    """A service as the builder takes it: its id and name, the team's namespace, its live
    revisions (stable first), whether it is stopped, how traffic is split (``traffic``'s
    routings), the gateway an HTTPRoute attaches to (``namespace/name``, or none) and the
    team's LocalQueue its replicas wait in (none when the cluster enforces quota without
    Kueue)."""

    service_id: int
    name: str
    namespace: str
    revisions: tuple[RevisionSpec, ...]
    routing: str
    stopped: bool = False
    gateway: str = ""
    placement: pods.Placement = field(default_factory=pods.Placement)
    queue: str = ""
    apps_domain: str = DEFAULT_APPS_DOMAIN

    @property
    def hostname(self) -> str:
        """Where the service answers through the cluster's gateway, in its team's domain."""
        return f"{self.name}.{team_domain(self.namespace, self.apps_domain)}"


def revision_object_name(name: str, number: int) -> str:
    """A revision's Deployment and (with the Gateway API) its Service."""
    return f"{name}-r{number}"


def ownership_selector(portal_name: str, service_id: int) -> str:
    """The label selector of one service's objects and pods."""
    return f"{MANAGED_BY_LABEL}={portal_name},{SERVICE_ID_LABEL}={service_id}"


def every_service_selector(portal_name: str) -> str:
    """The label selector of every service's objects and pods, in every namespace."""
    return f"{MANAGED_BY_LABEL}={portal_name},{SERVICE_ID_LABEL}"


def labels(spec: ServiceSpec, number: int | None = None) -> dict[str, str]:
    result = {
        MANAGED_BY_LABEL: spec.placement.portal_name,
        TEAM_LABEL: spec.namespace,
        SERVICE_ID_LABEL: str(spec.service_id),
    }
    if number is not None:
        result[REVISION_LABEL] = str(number)
    return result


def _metadata(spec: ServiceSpec, name: str, number: int | None = None) -> dict:
    return {"name": name, "namespace": spec.namespace, "labels": labels(spec, number)}


def readiness_probe(request: RevisionRequest) -> dict:
    if request.probe.kind == ProbeKind.TCP:
        check: dict = {"tcpSocket": {"port": PORT_NAME}}
    else:
        check = {"httpGet": {"path": request.probe.path, "port": PORT_NAME}}
    return {
        **check,
        "periodSeconds": PROBE_PERIOD_SECONDS,
        "failureThreshold": PROBE_FAILURE_THRESHOLD,
    }


def server_container(request: RevisionRequest) -> dict:
    manifest = pods.container(
        SERVER_CONTAINER, request.main, gpus={request.gpu_resource: str(request.gpus)}
    )
    manifest["ports"] = [{"name": PORT_NAME, "containerPort": request.port, "protocol": "TCP"}]
    manifest["readinessProbe"] = readiness_probe(request)
    return manifest


def sidecar_container(request: RevisionRequest) -> dict:
    """The CPU-only sidecar: no GPUs, and the node's GPUs hidden from it."""
    sidecar = request.sidecar
    assert sidecar is not None
    return pods.container(SIDECAR_CONTAINER, sidecar, env=pods.hide_gpus(sidecar.env))


def deployment(spec: ServiceSpec, revision: RevisionSpec, replicas: int) -> dict:
    request = revision.request
    queued = pods.kueue_labels(
        queue=spec.queue, priority=spec.queue, portal_name=spec.placement.portal_name
    )
    pod_labels = {**labels(spec, revision.number), **queued}
    containers = [server_container(request)]
    if request.sidecar is not None:
        containers.append(sidecar_container(request))
    template_metadata: dict = {"labels": dict(pod_labels)}
    if request.annotations:
        template_metadata["annotations"] = dict(request.annotations)
    metadata = _metadata(spec, revision_object_name(spec.name, revision.number), revision.number)
    metadata["labels"].update(queued)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": REVISION_HISTORY_LIMIT,
            "selector": {
                "matchLabels": {
                    SERVICE_ID_LABEL: str(spec.service_id),
                    REVISION_LABEL: str(revision.number),
                }
            },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "template": {
                "metadata": template_metadata,
                "spec": {
                    "affinity": pods.gpu_node_affinity(request.gpu_model, spec.placement),
                    "tolerations": [pods.gpu_toleration(spec.placement)],
                    "containers": containers,
                    # A model server answers requests; it has no business with the API.
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                },
            },
        },
    }


def _service(spec: ServiceSpec, name: str, selector: dict, port: int, number: int | None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, name, number),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [
                {"name": PORT_NAME, "port": port, "targetPort": PORT_NAME, "protocol": "TCP"}
            ],
        },
    }


def service(spec: ServiceSpec) -> dict:
    """The one Service in front of every live revision's ready replicas, on the stable
    revision's port (each pod's own ``http`` port behind it)."""
    selector = {
        MANAGED_BY_LABEL: spec.placement.portal_name,
        SERVICE_ID_LABEL: str(spec.service_id),
    }
    return _service(spec, spec.name, selector, spec.revisions[0].request.port, None)


def revision_service(spec: ServiceSpec, revision: RevisionSpec) -> dict:
    selector = {
        MANAGED_BY_LABEL: spec.placement.portal_name,
        SERVICE_ID_LABEL: str(spec.service_id),
        REVISION_LABEL: str(revision.number),
    }
    name = revision_object_name(spec.name, revision.number)
    return _service(spec, name, selector, revision.request.port, revision.number)


def route_weights(revisions: tuple[RevisionSpec, ...]) -> dict[int, int]:
    """Each revision's backend weight: the split asked for, except that a revision with no
    ready replica gets 0 while a weighted one has a ready replica. A gateway sends a backend
    without endpoints its share all the same, and each of those requests fails (503): a canary
    takes its share once its first replica is ready, not while its model loads."""
    serving = {r.number for r in revisions if r.ready and r.weight > 0}
    if not serving:
        return {r.number: r.weight for r in revisions}
    return {r.number: r.weight if r.number in serving else 0 for r in revisions}


def http_route(spec: ServiceSpec) -> dict:
    """The revisions' Services as one route's backends, weighted as the split says (by the
    revisions ready to serve: ``route_weights``)."""
    weights = route_weights(spec.revisions)
    backends = [
        {
            "group": "",
            "kind": "Service",
            "name": revision_object_name(spec.name, revision.number),
            "port": revision.request.port,
            "weight": weights[revision.number],
        }
        for revision in spec.revisions
    ]
    # Its own hostname in the team's domain: a route without one would match every request the
    # gateway gets, whichever team it was meant for.
    route_spec: dict = {"hostnames": [spec.hostname], "rules": [{"backendRefs": backends}]}
    if spec.gateway:
        namespace, _, name = spec.gateway.rpartition("/")
        parent = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name}
        if namespace:
            parent["namespace"] = namespace
        route_spec["parentRefs"] = [parent]
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": _metadata(spec, spec.name),
        "spec": route_spec,
    }


def service_objects(spec: ServiceSpec) -> list[dict]:
    """Everything the service should have on the cluster, each with the hash of itself."""
    if not spec.revisions:
        return []
    replicas = traffic.replicas_by_revision(
        spec.revisions, routing=spec.routing, stopped=spec.stopped
    )
    objects = [deployment(spec, r, replicas[r.number]) for r in spec.revisions]
    objects.append(service(spec))
    if spec.routing == traffic.GATEWAY_API:
        objects += [revision_service(spec, r) for r in spec.revisions]
        objects.append(http_route(spec))
    return [with_hash(obj) for obj in objects]


def stored_spec(service_row: InferenceService, *, routing: str, gateway: str = "") -> ServiceSpec:
    """The spec of a stored service (reads its live revisions; select its team and cluster
    with it)."""
    from clusters.models import QuotaMode
    from serving.models import Revision

    live = list(
        service_row.revisions.exclude(role=Revision.Role.RETIRED).order_by("role", "number")
    )
    # Stable first ("candidate" sorts before "stable"): the one Service takes its port.
    live.sort(key=lambda r: (r.role != Revision.Role.STABLE, r.number))
    return ServiceSpec(
        service_id=service_row.pk,
        name=service_row.name,
        namespace=service_row.team.slug,
        revisions=tuple(
            RevisionSpec(
                number=r.number,
                request=RevisionRequest.from_model(r),
                replicas=r.replicas,
                weight=r.weight,
                role=r.role,
                ready=r.ready_replicas > 0,
            )
            for r in live
        ),
        routing=routing,
        stopped=service_row.state == service_row.State.STOPPED,
        gateway=gateway,
        placement=pods.cluster_placement(service_row.cluster),
        queue=GUARANTEED if service_row.cluster.quota_mode == QuotaMode.KUEUE else "",
        apps_domain=service_row.cluster.apps_domain,
    )
