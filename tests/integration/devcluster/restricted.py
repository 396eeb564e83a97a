"""Pods for the real node as the portal runs its users' code there: a non-root user, no privilege
escalation, no capabilities, the runtime's default seccomp profile (what the "restricted" Pod
Security Standard asks)."""

from __future__ import annotations

from tests.integration.conftest import wait_for
from tests.integration.kube import read_or_none

MOUNT_PATH = "/data"


def restricted_pod(
    real_node,
    name: str,
    image: str,
    *,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    claim: str | None = None,
    run_as_user: int | None = None,
) -> dict:
    """A pod for the real node; ``claim`` mounts that PersistentVolumeClaim at ``MOUNT_PATH``.
    Without ``run_as_user`` the image's own user must be a numeric, non-root one (the kubelet
    checks ``runAsNonRoot``)."""
    container = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if command is not None:
        container["command"] = command
    if args is not None:
        container["args"] = args
    if env:
        container["env"] = [{"name": key, "value": value} for key, value in env.items()]
    pod_security = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if run_as_user is not None:
        pod_security.update(runAsUser=run_as_user, runAsGroup=run_as_user)
    spec = {
        "nodeSelector": real_node.node_selector,
        "tolerations": [real_node.toleration],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "securityContext": pod_security,
        "containers": [container],
    }
    if claim is not None:
        container["volumeMounts"] = [{"name": "data", "mountPath": MOUNT_PATH}]
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def finished(core, namespace: str, name: str, timeout: float = 120) -> tuple[str, str]:
    """Wait until the pod has finished; its phase and log."""
    pod = wait_for(
        lambda: (
            (p := core.read_namespaced_pod(name, namespace)).status.phase in ("Succeeded", "Failed")
            and p
        ),
        timeout=timeout,
        what=f"pod {name} to finish",
    )
    return pod.status.phase, core.read_namespaced_pod_log(name, namespace)


def running(core, namespace: str, name: str, timeout: float = 120):
    """Wait until the pod runs; the pod."""
    return wait_for(
        lambda: (
            (p := core.read_namespaced_pod(name, namespace)).status.phase == "Running"
            and p.status.pod_ip
            and p
        ),
        timeout=timeout,
        what=f"pod {name} to run",
    )


def delete_pod(core, namespace: str, name: str) -> None:
    """Delete the pod and wait until it is gone."""
    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_for(
        lambda: read_or_none(core.read_namespaced_pod, name, namespace) is None,
        timeout=60,
        what=f"pod {name} to go",
    )
