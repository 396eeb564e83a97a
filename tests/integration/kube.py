"""The cluster side of the integration tests, in one place: the devcluster's admin clients (as
fixtures in conftest.py), throwaway namespaces, reads that may find nothing, and GPU pods built
the way the portal builds them (the seed's node affinity, the GPU taint's toleration)."""

from __future__ import annotations

import time
import uuid

from kubernetes import client
from kubernetes.client.rest import ApiException

from clusters.vocabulary import MANAGED_BY_LABEL
from tests.integration.conftest import wait_for

GPU_NODE_TERM = {
    "matchExpressions": [{"key": "hardware-type", "operator": "In", "values": ["gpu"]}]
}
GPU_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [GPU_NODE_TERM]}
    }
}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def read_or_none(read, *args):
    """``read(*args)``, or None when the object is not there (404)."""
    try:
        return read(*args)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _direct(function, *args, **kwargs):
    return function(*args, **kwargs)


def create_namespace(core, prefix: str, *, call=_direct) -> str:
    """A uniquely named namespace, returned once pods may be created in it (its ``default``
    service account exists). ``call`` wraps each API call, e.g. to retry through an outage."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    call(core.create_namespace, {"metadata": {"name": name}})
    wait_for(
        lambda: call(read_or_none, core.read_namespaced_service_account, "default", name),
        timeout=30,
        interval=0.25,
        what=f"the default service account in {name}",
    )
    return name


def delete_namespace(core, name: str, *, call=_direct) -> None:
    """Delete a namespace and, in the background, everything in it; gone already is fine."""
    try:
        call(core.delete_namespace, name, propagation_policy="Background")
    except ApiException as error:
        if error.status != 404:
            raise


def gpu_pod(
    name: str,
    gpus: int = 1,
    *,
    annotations: dict | None = None,
    labels: dict | None = None,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    gpu_model: str | None = None,
) -> dict:
    """A pod asking for ``gpus`` nvidia.com/gpu (and ``cpu``/``memory`` unless None), placed
    on GPU nodes by the seed's affinity and tolerating their taint, with a deadline as every
    bare GPU pod in a team namespace needs; with ``gpu_model``, only on nodes of that model (the
    devcluster has A100 and H100 nodes)."""
    amounts = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}
    amounts = {resource: value for resource, value in amounts.items() if value is not None}
    affinity = GPU_AFFINITY
    if gpu_model:
        model = {"key": "nvidia.com/gpu.product", "operator": "In", "values": [gpu_model]}
        term = {"matchExpressions": [*GPU_NODE_TERM["matchExpressions"], model]}
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 3600,
            "affinity": affinity,
            "tolerations": [GPU_TOLERATION],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/trainer:1",
                    "resources": {"requests": dict(amounts), "limits": dict(amounts)},
                }
            ],
        },
    }


def cpu_job(name: str, namespace: str, *, labels: dict | None = None, suspend: bool = True) -> dict:
    """A Job of one CPU container (kwok runs its pod on a CPU node), suspended (no pod yet)
    unless ``suspend`` is False."""
    labels = dict(labels or {})
    container = {"name": "main", "image": "registry.example.com/ml/trainer:1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "suspend": suspend,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


# How long the API server's admission may go on enforcing a policy after it is deleted (its
# informer's delay; well under a second on the devcluster).
ADMISSION_SETTLE_SECONDS = 2


def remove_admission_objects(api: client.ApiClient, portal_name: str) -> None:
    """Delete what a portal's cluster passes installed (its admission policies and their
    bindings), as the admin: a test session leaves the shared devcluster as it found it. When
    there were some, returns once the API server's admission has let go of them too, so that
    the next pod created in a namespace of that portal meets none of them."""
    admission = client.AdmissionregistrationV1Api(api)
    selector = f"{MANAGED_BY_LABEL}={portal_name}"
    removed = 0
    for items, delete in (
        (
            admission.list_validating_admission_policy_binding(label_selector=selector).items,
            admission.delete_validating_admission_policy_binding,
        ),
        (
            admission.list_validating_admission_policy(label_selector=selector).items,
            admission.delete_validating_admission_policy,
        ),
    ):
        for item in items:
            try:
                delete(item.metadata.name)
                removed += 1
            except ApiException as error:
                if error.status != 404:
                    raise
    if removed:
        time.sleep(ADMISSION_SETTLE_SECONDS)
