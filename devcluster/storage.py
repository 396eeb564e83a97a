"""Storage for the devcluster: rancher's local-path-provisioner (built from its Go module,
``builder.TOOL_BUILDS``), running on the host beside the control plane, so that a
PersistentVolumeClaim gets a real directory on the real node.

The StorageClass ``local-path`` (the cluster's default, ``WaitForFirstConsumer``, reclaim policy
``Delete``) names the provisioner ``rancher.io/local-path``. When the scheduler has placed a pod
that uses a claim, the provisioner makes the volume's directory, under ``volumes_dir`` in the
state directory, with a helper pod on that node (the Debian base image, loaded onto the real
node: ``sh``, ``mkdir``, ``rm``; mode 0777, so any user of a pod can write there), and creates a
``hostPath`` PersistentVolume bound to that node; deleting the claim has a helper pod remove the
directory and the volume goes.

Claims of pods on the simulated (kwok) nodes are provisioned too: their helper pods carry the
annotation that has kwok finish them at once, so such a pod binds and runs as it would on a
real cluster; nothing is written anywhere (``simulated_dir`` stays empty).

The provisioner acts as a user of its own (``IDENTITY``) with upstream's permissions (a
ClusterRole to read nodes, claims and classes, manage PersistentVolumes and write events; a Role
to run its helper pods in ``NAMESPACE``), less the ConfigMaps and pods it would read across the
cluster: its configuration and helper pod template are files here. Started on demand (``start``:
``up --storage``, the ``storage`` test fixture), stopped with the cluster; like the real node, on
instance 1 only.
"""

from __future__ import annotations

import json

import yaml
from kubernetes import client

from devcluster import builder, credentials, images, processes
from devcluster import real_node as real_node_module
from devcluster.components import Component
from devcluster.kueue import apply
from devcluster.settings import Settings

STORAGE_CLASS = "local-path"
PROVISIONER = "rancher.io/local-path"  # the provisioner's own default name
NAMESPACE = "local-path-storage"
CONFIG_MAP = "local-path-config"  # the helper pods' setup and teardown scripts
HELPER_SERVICE_ACCOUNT = "local-path-helper"
IDENTITY = "devcluster:storage"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
# kwok finishes a pod so annotated at once (devcluster/assets/kwok-stages.yaml); the real
# node's kubelet ignores it.
COMPLETE_AT_ONCE = {"devcluster.gpuportal.io/complete-after-seconds": "0"}
# What local-path-provisioner's config calls every node its nodePathMap does not list.
OTHER_NODES = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
STARTED = "Started provisioner controller"  # its log line once its informers have synced

SETUP_SCRIPT = """#!/bin/sh
set -eu
mkdir -m 0777 -p "$VOL_DIR"
"""
TEARDOWN_SCRIPT = """#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
"""


class StorageUnavailable(RuntimeError):
    """The storage provisioner cannot run here; the message says why."""


def directory(settings: Settings):
    return settings.state_dir / "storage"


def volumes_dir(settings: Settings):
    """Where the real node's volumes are, one directory each (``<pv>_<namespace>_<claim>``)."""
    return directory(settings) / "volumes"


def simulated_dir(settings: Settings):
    """The path the simulated nodes' volumes name; nothing is made there."""
    return directory(settings) / "simulated"


def config(settings: Settings) -> dict:
    """local-path-provisioner's configuration (its ``config.json``)."""
    return {
        "nodePathMap": [
            {"node": real_node_module.REAL_NODE_NAME, "paths": [str(volumes_dir(settings))]},
            {"node": OTHER_NODES, "paths": [str(simulated_dir(settings))]},
        ],
        "cmdTimeoutSeconds": 120,
    }


def helper_pod(image: str) -> dict:
    """The template of the helper pods that make and remove a volume's directory: the
    provisioner sets the node, command, volumes and service account. It runs as root (the
    directories are root's), with no API token."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod", "annotations": dict(COMPLETE_AT_ONCE)},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            # Replaces the provisioner's own (disk pressure only).
            "tolerations": [
                dict(real_node_module.TOLERATION),
                {
                    "key": "node.kubernetes.io/disk-pressure",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                },
            ],
            "containers": [
                # The provisioner reads the logs of the container of this name.
                {"name": "helper-pod", "image": image, "imagePullPolicy": "Never"}
            ],
        },
    }


def storage_class() -> dict:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
    }


def objects() -> list[dict]:
    """What the cluster's admin applies for the provisioner: its RBAC, namespace, the helper
    pods' service account and scripts, and the StorageClass."""
    rbac = "rbac.authorization.k8s.io"
    user = {"apiGroup": rbac, "kind": "User", "name": IDENTITY}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": HELPER_SERVICE_ACCOUNT, "namespace": NAMESPACE},
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
            "data": {"setup": SETUP_SCRIPT, "teardown": TEARDOWN_SCRIPT},
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "devcluster-storage"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["nodes", "persistentvolumeclaims"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": [""],
                    "resources": ["persistentvolumes"],
                    "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
                {
                    "apiGroups": ["storage.k8s.io"],
                    "resources": ["storageclasses"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "devcluster-storage"},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "devcluster-storage"},
            "subjects": [user],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": {"name": "devcluster-storage", "namespace": NAMESPACE},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "list", "watch", "create", "delete"],
                },
                {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            ],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "devcluster-storage", "namespace": NAMESPACE},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "devcluster-storage"},
            "subjects": [user],
        },
        storage_class(),
    ]


def _command(s: Settings) -> list[str]:
    base = directory(s)
    return [
        str(builder.binary("local-path-provisioner")),
        "start",
        f"--kubeconfig={base / 'provisioner.kubeconfig'}",
        f"--config={base / 'config.json'}",
        f"--helper-pod-file={base / 'helperPod.yaml'}",
        f"--provisioner-name={PROVISIONER}",
        f"--namespace={NAMESPACE}",
        f"--configmap-name={CONFIG_MAP}",
        f"--service-account-name={HELPER_SERVICE_ACCOUNT}",
    ]


def _env(s: Settings) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(directory(s))}


def _started(s: Settings) -> bool:
    """Its controller runs: the log since its last start says so (it serves nothing to ask)."""
    log = s.log_dir / f"{COMPONENT.name}.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return STARTED in text.rsplit("\n=== ", 1)[-1]


COMPONENT = Component(
    "storage",
    "local-path-provisioner start",
    _command,
    lambda s: (
        processes.running_pid(s.run_dir, COMPONENT.name, COMPONENT.marker) is not None
        and _started(s)
    ),
    env=_env,
)


def running(settings: Settings) -> bool:
    return COMPONENT.healthy(settings)


def write_configs(settings: Settings, helper_image: str) -> bool:
    """Write the provisioner's configuration and helper pod template; whether they changed."""
    base = directory(settings)
    for path in (base, volumes_dir(settings), simulated_dir(settings)):
        path.mkdir(parents=True, exist_ok=True)
    changed = False
    for name, text in (
        ("config.json", json.dumps(config(settings), indent=2)),
        ("helperPod.yaml", yaml.safe_dump(helper_pod(helper_image))),
    ):
        path = base / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed = True
    return changed


def start(settings: Settings, api: client.ApiClient, start_and_wait) -> str:
    """Load the helper image onto the real node, apply the provisioner's objects, then start it
    (``start_and_wait``: the cluster's own) unless it runs; the real node must be running.
    Returns the helper image's name."""
    if settings.instance != 1:
        raise StorageUnavailable(
            "the storage provisioner runs on instance 1 only, for the real node"
        )
    if not real_node_module.running(settings):
        raise StorageUnavailable(
            "the storage provisioner needs the real node (`python -m devcluster up --storage` "
            "starts both)"
        )
    helper_image = images.base_image()
    real_node_module.ensure_image(settings, helper_image)
    for obj in objects():
        apply(api, obj)
    changed = write_configs(settings, helper_image)
    if running(settings) and not changed:
        return helper_image
    stop(settings)
    credentials.mint(
        IDENTITY, settings=settings, output=directory(settings) / "provisioner.kubeconfig"
    )
    start_and_wait(settings, [COMPONENT])
    return helper_image


def stop(settings: Settings) -> bool:
    return processes.stop(settings.run_dir, COMPONENT.name, COMPONENT.marker)
