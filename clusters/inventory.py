"""Small reads and one guarded delete on a cluster, for monitoring: its GPU nodes and what the
pods on them hold, and stopping an idle pod the portal itself created.

Like everything that talks to Kubernetes, this lives in ``clusters``. Responses are read as
plain JSON (``_preload_content=False``) and summarised by pure functions, which is both faster
than the client's model objects and testable without a cluster. Failures surface as
``ClusterUnavailable`` so callers need not know the kubernetes client's exceptions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from clusters.models import Cluster

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
TERMINAL_PHASES = ("Succeeded", "Failed")
REQUEST_TIMEOUT_SECONDS = 10


class ClusterUnavailable(Exception):
    """The cluster's API could not be reached or refused the read."""


class StopRefused(Exception):
    """The pod is not the portal's to stop (or is already gone)."""


# --- connection ------------------------------------------------------------------------------


def _api_client(cluster: Cluster) -> client.ApiClient:
    """An API client from the cluster's kubeconfig, or the service account of the pod the
    portal runs in; the cluster's API server URL, when set, wins over either."""
    configuration = client.Configuration()
    try:
        if cluster.kubeconfig_path:
            config.load_kube_config(
                config_file=cluster.kubeconfig_path, client_configuration=configuration
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            raise ClusterUnavailable(
                f"Cluster {cluster.name} has no kubeconfig path and the portal does not run "
                "inside a cluster."
            )
    except (config.ConfigException, OSError, ValueError) as error:
        raise ClusterUnavailable(
            f"No usable credentials for cluster {cluster.name}: {error}"
        ) from error
    if cluster.api_server_url:
        configuration.host = cluster.api_server_url.rstrip("/")
    return client.ApiClient(configuration)


@contextmanager
def _apis(cluster: Cluster, what: str) -> Iterator[tuple[client.CoreV1Api, client.BatchV1Api]]:
    api = _api_client(cluster)
    try:
        yield client.CoreV1Api(api), client.BatchV1Api(api)
    except ApiException as error:
        raise ClusterUnavailable(
            f"Cluster {cluster.name} refused to {what}: {error.status} {error.reason}"
        ) from error
    except (HTTPError, OSError) as error:
        raise ClusterUnavailable(f"Cluster {cluster.name} cannot be reached: {error}") from error
    finally:
        api.close()


def _json(response) -> dict:
    return json.loads(response.data)


# --- GPU nodes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeGpus:
    """One GPU node: its model, whether it is Ready, and per GPU resource name how many GPUs it
    offers (allocatable) and how many the non-finished pods bound to it ask for (allocated)."""

    name: str
    gpu_model: str
    ready: bool
    allocatable: dict[str, int] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)

    @property
    def gpus_allocatable(self) -> int:
        return sum(self.allocatable.values())

    @property
    def gpus_allocated(self) -> int:
        return sum(self.allocated.values())


def _quantity(value) -> int:
    # Extended resources are whole numbers; anything else (e.g. "1k") is not a GPU count.
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def _pod_gpus(pod: dict, resource_names: Sequence[str]) -> dict[str, int]:
    """GPUs a pod asks for per resource name: its containers' sum, or an init container's if
    larger (init containers run one at a time, before the others)."""
    spec = pod.get("spec", {})

    def asked(container: dict, name: str) -> int:
        resources = container.get("resources") or {}
        return _quantity(
            (resources.get("limits") or {}).get(name) or (resources.get("requests") or {}).get(name)
        )

    totals = {}
    for name in resource_names:
        running = sum(asked(c, name) for c in spec.get("containers") or [])
        init = max((asked(c, name) for c in spec.get("initContainers") or []), default=0)
        if max(running, init):
            totals[name] = max(running, init)
    return totals


def summarise_nodes(
    nodes: Iterable[dict], pods: Iterable[dict], *, resource_names: Sequence[str], model_label: str
) -> list[NodeGpus]:
    """Nodes with any GPU of ``resource_names`` allocatable, each with the GPUs its bound,
    unfinished pods ask for. Pure: takes the API's JSON items."""
    allocated: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        held = allocated.setdefault(node, {})
        for name, gpus in _pod_gpus(pod, resource_names).items():
            held[name] = held.get(name, 0) + gpus
    summaries = []
    for node in nodes:
        metadata, status = node.get("metadata", {}), node.get("status", {})
        offered = {
            name: _quantity((status.get("allocatable") or {}).get(name))
            for name in resource_names
            if _quantity((status.get("allocatable") or {}).get(name)) > 0
        }
        if not offered:
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        summaries.append(
            NodeGpus(
                name=metadata["name"],
                gpu_model=(metadata.get("labels") or {}).get(model_label, ""),
                ready=ready,
                allocatable=offered,
                allocated=allocated.get(metadata["name"], {}),
            )
        )
    return sorted(summaries, key=lambda n: n.name)


def gpu_resource_names(cluster: Cluster) -> list[str]:
    """The GPU resource names the cluster is known to offer (nvidia.com/gpu at least)."""
    names = set(cluster.gpu_capacities.values_list("resource_name", flat=True))
    return sorted(names | {DEFAULT_GPU_RESOURCE})


def gpu_nodes(cluster: Cluster) -> list[NodeGpus]:
    """The cluster's GPU nodes (by its GPU node selector) with allocatable and allocated GPUs."""
    selector = ",".join(f"{k}={v}" for k, v in sorted((cluster.gpu_node_selector or {}).items()))
    with _apis(cluster, "list its nodes and pods") as (core, _):
        nodes = _json(
            core.list_node(
                label_selector=selector,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        )["items"]
        pods = _json(
            core.list_pod_for_all_namespaces(
                field_selector="status.phase!=Succeeded,status.phase!=Failed",
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        )["items"]
    return summarise_nodes(
        nodes,
        pods,
        resource_names=gpu_resource_names(cluster),
        model_label=cluster.gpu_model_label,
    )


# --- stopping a pod the portal created ------------------------------------------------------


@dataclass(frozen=True)
class Stopped:
    """What was deleted to stop a pod: its owning Job, or the pod itself."""

    kind: str
    name: str


def stop_target(pod: dict, *, managed_by: str) -> Stopped:
    """What to delete to stop this pod: its Job when a Job owns it (deleting only the pod would
    make the Job start another), else the pod. Refuses pods without the portal's label."""
    metadata = pod.get("metadata", {})
    if (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != managed_by:
        raise StopRefused(
            f"Pod {metadata.get('name')} is not labelled {MANAGED_BY_LABEL}={managed_by}; "
            "the portal only stops what it created."
        )
    for owner in metadata.get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("apiVersion", "").startswith("batch/"):
            return Stopped(kind="Job", name=owner["name"])
    return Stopped(kind="Pod", name=metadata["name"])


def _read_stop_target(
    core: client.CoreV1Api, batch: client.BatchV1Api, *, namespace: str, pod: str
) -> Stopped:
    managed_by = settings.PORTAL_NAME
    try:
        body = _json(
            core.read_namespaced_pod(
                pod, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        )
    except ApiException as error:
        if error.status == 404:
            raise StopRefused(f"Pod {namespace}/{pod} no longer exists.") from error
        raise
    target = stop_target(body, managed_by=managed_by)
    if target.kind == "Job":
        job = _json(
            batch.read_namespaced_job(
                target.name,
                namespace,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        )
        if (job.get("metadata", {}).get("labels") or {}).get(MANAGED_BY_LABEL) != managed_by:
            raise StopRefused(f"Job {namespace}/{target.name} is not managed by the portal.")
    return target


def check_stoppable(cluster: Cluster, *, namespace: str, pod: str) -> Stopped:
    """What ``stop_managed_pod`` would delete; ``StopRefused`` when it would refuse."""
    with _apis(cluster, f"read {namespace}/{pod}") as (core, batch):
        return _read_stop_target(core, batch, namespace=namespace, pod=pod)


def stop_managed_pod(cluster: Cluster, *, namespace: str, pod: str) -> Stopped:
    """Stop a pod the portal manages by deleting its Job (with its pods) or the pod itself.

    The Job must carry the portal's label too; anything else is refused with ``StopRefused``.
    """
    with _apis(cluster, f"stop {namespace}/{pod}") as (core, batch):
        target = _read_stop_target(core, batch, namespace=namespace, pod=pod)
        if target.kind == "Job":
            batch.delete_namespaced_job(
                target.name,
                namespace,
                propagation_policy="Background",
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        else:
            core.delete_namespaced_pod(pod, namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        return target
