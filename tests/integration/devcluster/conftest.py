"""Helpers for the devcluster's own integration tests: an admin client, a throwaway namespace
per test, GPU pod manifests with the seed's node affinity, and a bounded poll."""

import time
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

GPU_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "hardware-type", "operator": "In", "values": ["gpu"]}
                    ]
                }
            ]
        }
    }
}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def eventually(predicate, *, timeout=30.0, interval=0.25, what="condition"):
    """Poll predicate() until it returns something truthy and return it; fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def gpu_pod(name, gpus, annotations=None, image="registry.example/trainer:1"):
    """A pod manifest asking for `gpus` nvidia.com/gpu the way the portal builds GPU pods."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {
            "restartPolicy": "Never",
            "affinity": GPU_AFFINITY,
            "tolerations": [GPU_TOLERATION],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="session")
def k8s(devcluster):
    """A kubernetes ApiClient acting as the cluster admin."""
    api = devcluster.api_client()
    yield api
    api.close()


@pytest.fixture(scope="session")
def core(k8s):
    return client.CoreV1Api(k8s)


def create_namespace(core_api, prefix="dc-test"):
    """Create a uniquely named namespace and wait until pods may be created in it."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    core_api.create_namespace({"metadata": {"name": name}})

    def default_service_account_exists():
        try:
            return core_api.read_namespaced_service_account("default", name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    eventually(default_service_account_exists, timeout=30, what=f"default SA in {name}")
    return name


def delete_namespace(core_api, name):
    try:
        core_api.delete_namespace(name, propagation_policy="Background")
    except ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
def namespace(core):
    """A fresh namespace for one test, deleted afterwards."""
    name = create_namespace(core)
    yield name
    delete_namespace(core, name)


@pytest.fixture
def other_namespace(core):
    name = create_namespace(core)
    yield name
    delete_namespace(core, name)
