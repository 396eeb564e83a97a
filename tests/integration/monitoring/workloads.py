"""Workloads on the devcluster for monitoring tests (and the browser test): GPU pods and Jobs
the way the portal builds them, throwaway namespaces, and bounded polls of Prometheus."""

from __future__ import annotations

import socket
import time
import uuid

import httpx
import pytest
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

UTILISATION = "devcluster.gpuportal.io/gpu-util"
MANAGED_BY = "app.kubernetes.io/managed-by"
GPU_TERM = {"matchExpressions": [{"key": "hardware-type", "operator": "In", "values": ["gpu"]}]}
GPU_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [GPU_TERM]}
    }
}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def eventually(predicate, *, timeout=60.0, interval=1.0, what="condition"):
    """Poll predicate() until it returns something truthy and return it; fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# Other sessions share the devcluster, and some restart its API server on purpose (the
# reconcile tests); a call that cannot connect is tried again for this long.
API_SERVER_GRACE_SECONDS = 90


def patiently(call, *args, **kwargs):
    """``call(*args, **kwargs)``, tried again while the API server cannot be reached."""
    deadline = time.monotonic() + API_SERVER_GRACE_SECONDS
    while True:
        try:
            return call(*args, **kwargs)
        except (HTTPError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def create_namespace(core_api, prefix="mon") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    patiently(core_api.create_namespace, {"metadata": {"name": name}})

    def service_account_ready():
        try:
            return patiently(core_api.read_namespaced_service_account, "default", name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    eventually(service_account_ready, timeout=30, interval=0.25, what=f"default SA in {name}")
    return name


def delete_namespace(core_api, name: str) -> None:
    try:
        patiently(core_api.delete_namespace, name, propagation_policy="Background")
    except ApiException as error:
        if error.status != 404:
            raise


def gpu_pod(name, *, gpus=1, utilisation=None, labels=None):
    """A pod the way the portal builds GPU pods: the seed's node affinity, the GPU toleration,
    nvidia.com/gpu in its limits; the devcluster annotation sets its simulated utilisation."""
    annotations = {UTILISATION: str(utilisation)} if utilisation is not None else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations, "labels": dict(labels or {})},
        "spec": {
            "restartPolicy": "Never",
            "affinity": GPU_AFFINITY,
            "tolerations": [GPU_TOLERATION],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/trainer:1",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


def run_pod(core_api, namespace, manifest) -> dict:
    patiently(core_api.create_namespaced_pod, namespace, manifest)
    name = manifest["metadata"]["name"]
    pod = eventually(
        lambda: (
            (p := patiently(core_api.read_namespaced_pod, name, namespace)).status.phase
            == "Running"
            and p
        ),
        timeout=60,
        interval=0.25,
        what=f"pod {namespace}/{name} to run",
    )
    return pod


def portal_job(name, *, utilisation, gpus=1) -> dict:
    """A Job carrying the portal's label, as the jobs app will create them."""
    template = gpu_pod(name, gpus=gpus, utilisation=utilisation, labels={MANAGED_BY: "gpu-portal"})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {MANAGED_BY: "gpu-portal"}},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def prometheus_has(devcluster, promql: str, *, count: int = 1, timeout: float = 60):
    """Wait until an instant query returns at least ``count`` series; return them."""

    def ready():
        try:
            result = devcluster.prometheus_query(promql)
        except OSError:
            return None  # another session may be restarting Prometheus
        return len(result) >= count and result

    return eventually(ready, timeout=timeout, interval=1, what=f"{count} series for {promql}")


def delete_series(devcluster, selector: str) -> None:
    """Tidy the shared Prometheus: drop series a test backfilled (admin API, no restart)."""
    httpx.post(
        f"{devcluster.prometheus_url}/api/v1/admin/tsdb/delete_series",
        params={"match[]": selector},
        timeout=30,
    ).raise_for_status()


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
