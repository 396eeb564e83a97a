"""A stand-in for the GPU Operator's MIG manager and device plugin reconfiguration.

Every POLL_SECONDS it lists the devcluster's managed nodes (one request) and compares, per GPU
node, the configs its labels ask for with the ones applied (kept in annotations of our own):

* ``nvidia.com/mig.config`` (absent: the node's MIG is not managed) against
  ``devcluster.gpuportal.io/mig-config-applied`` (absent: ``all-disabled``);
* ``nvidia.com/device-plugin.config`` (absent or empty: no sharing) against
  ``devcluster.gpuportal.io/device-plugin-config-applied`` (absent: none).

When they differ the node is reconfigured, as ``devcluster.gpu_sharing`` computes it:

1. a MIG change sets ``nvidia.com/mig.config.state=pending`` at once (a device plugin change has
   no state label in the real operator, so nothing shows);
2. a MIG change waits while any pod on the node that has not finished (phase other than Succeeded
   or Failed) asks for a GPU resource (``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` or
   ``nvidia.com/mig-*``): the real MIG manager does not repartition GPUs in use. The state stays
   ``pending`` meanwhile, and the delay starts once they are gone;
3. after the node's ``devcluster.gpuportal.io/sharing-delay-seconds`` (default 2) the change is
   applied: allocatable and capacity (status subresource), the product, replicas, strategy and
   ``nvidia.com/mig-<profile>.count`` labels, the applied annotations, and
   ``nvidia.com/mig.config.state=success`` (written last, after allocatable);
4. unless the node carries ``devcluster.gpuportal.io/sharing-fail`` (its value the reason) or a
   config is unknown: then nothing of the node's shape changes, a MIG change ends in
   ``nvidia.com/mig.config.state=failed``, and ``devcluster.gpuportal.io/sharing-error`` says why.
   ``devcluster.gpuportal.io/sharing-failed-request`` (``<mig config>|<device plugin config>``)
   keeps the manager from retrying the same request; changing a label again retries, and setting
   them back to the applied configs returns the state to ``success`` and clears both annotations.

It writes ``--heartbeat`` after every successful pass (the devcluster's health check).

Run as: python -m devcluster.sharing_manager --kubeconfig PATH --heartbeat PATH
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path

from devcluster import gpu_sharing as gs

POLL_SECONDS = 0.5
MANAGED_SELECTOR = "devcluster.gpuportal.io/managed=true"


@dataclass(frozen=True)
class NodeView:
    """What the manager reads of a node."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    allocatable: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """What to do with a node on this pass: the patches (None: none) and whether the node's
    change still waits (the caller keeps its `since`)."""

    waiting: bool = False
    request: str = ""
    labels: dict[str, str | None] | None = None
    annotations: dict[str, str | None] | None = None
    resources: dict[str, str | None] | None = None  # for allocatable and capacity alike


def request_of(labels: dict[str, str]) -> str:
    return f"{labels.get(gs.MIG_CONFIG_LABEL, '')}|{labels.get(gs.DEVICE_PLUGIN_CONFIG_LABEL, '')}"


def step(node: NodeView, waited: float | None, gpu_pods: bool) -> Step:
    """Decide one pass for one node. `waited`: seconds since this node's current request was first
    seen with the node free to change (None: not seen before); `gpu_pods`: whether unfinished pods
    on it ask for GPU resources."""
    labels, annotations = node.labels, node.annotations
    if gs.GPU_COUNT_LABEL not in labels:
        return Step()
    mig_wanted = labels.get(gs.MIG_CONFIG_LABEL)
    mig_applied = annotations.get(gs.MIG_APPLIED_ANNOTATION, gs.MIG_CONFIG_DISABLED)
    dp_wanted = labels.get(gs.DEVICE_PLUGIN_CONFIG_LABEL, "")
    dp_applied = annotations.get(gs.DEVICE_PLUGIN_APPLIED_ANNOTATION, "")
    mig_change = mig_wanted is not None and mig_wanted != mig_applied
    request = request_of(labels)
    state = labels.get(gs.MIG_CONFIG_STATE_LABEL)
    if not mig_change and dp_wanted == dp_applied:
        fix_labels = (
            {gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_SUCCESS}
            if mig_wanted is not None and state != gs.MIG_STATE_SUCCESS
            else None
        )
        stale = [a for a in (gs.ERROR_ANNOTATION, gs.FAILED_REQUEST_ANNOTATION) if a in annotations]
        return Step(labels=fix_labels, annotations=dict.fromkeys(stale) or None)
    if annotations.get(gs.FAILED_REQUEST_ANNOTATION) == request:
        return Step()  # failed already; waits for a label change
    pending = (
        {gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_PENDING}
        if mig_change and state != gs.MIG_STATE_PENDING
        else None
    )
    if (mig_change and gpu_pods) or waited is None or waited < gs.sharing_delay(annotations):
        return Step(waiting=not (mig_change and gpu_pods), request=request, labels=pending)
    reason = annotations.get(gs.FAIL_ANNOTATION)
    mig_config = (
        mig_wanted if mig_wanted is not None else annotations.get(gs.MIG_APPLIED_ANNOTATION)
    )
    shape = None
    if reason is None:
        try:
            shape = gs.node_shape(
                labels.get(gs.PRODUCT_LABEL, ""),
                int(labels[gs.GPU_COUNT_LABEL]),
                mig_config,
                dp_wanted,
            )
        except gs.UnknownConfig as error:
            reason = str(error)
    if shape is None:
        failed = {gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_FAILED} if mig_change else None
        return Step(
            request=request,
            labels=failed,
            annotations={
                gs.ERROR_ANNOTATION: reason or "reconfiguration failed",
                gs.FAILED_REQUEST_ANNOTATION: request,
            },
        )
    new_labels = gs.label_patch(labels, shape.labels)
    if mig_wanted is not None:
        new_labels[gs.MIG_CONFIG_STATE_LABEL] = gs.MIG_STATE_SUCCESS
    return Step(
        request=request,
        labels=new_labels,
        annotations={
            gs.MIG_APPLIED_ANNOTATION: mig_wanted if mig_wanted is not None else mig_applied,
            gs.DEVICE_PLUGIN_APPLIED_ANNOTATION: dp_wanted,
            gs.ERROR_ANNOTATION: None,
            gs.FAILED_REQUEST_ANNOTATION: None,
        },
        resources=gs.resource_patch(node.allocatable, shape.resources),
    )


def _requests_gpu(pod) -> bool:
    for container in pod.spec.containers or []:
        resources = container.resources
        if resources is None:
            continue
        for name in {**(resources.requests or {}), **(resources.limits or {})}:
            if gs.is_gpu_resource(name):
                return True
    return False


class Manager:
    """The loop's state: since when each node's current request has been waiting."""

    def __init__(self, api) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api)
        self._since: dict[str, tuple[str, float]] = {}

    def _gpu_pods(self, node: str) -> bool:
        pods = self._core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed"
        ).items
        return any(_requests_gpu(pod) for pod in pods)

    def run_once(self, now: float) -> None:
        seen = set()
        for node in self._core.list_node(label_selector=MANAGED_SELECTOR).items:
            view = NodeView(
                name=node.metadata.name,
                labels=dict(node.metadata.labels or {}),
                annotations=dict(node.metadata.annotations or {}),
                allocatable=dict(node.status.allocatable or {}),
            )
            seen.add(view.name)
            self._handle(view, now)
        for name in set(self._since) - seen:
            del self._since[name]

    def _handle(self, view: NodeView, now: float) -> None:
        request = request_of(view.labels)
        since = self._since.get(view.name)
        waited = now - since[1] if since and since[0] == request else None
        mig_change = gs.MIG_CONFIG_LABEL in view.labels and view.labels[
            gs.MIG_CONFIG_LABEL
        ] != view.annotations.get(gs.MIG_APPLIED_ANNOTATION, gs.MIG_CONFIG_DISABLED)
        gpu_pods = mig_change and self._gpu_pods(view.name)
        decided = step(view, waited, gpu_pods)
        if decided.waiting:
            if waited is None:
                self._since[view.name] = (request, now)
        else:
            self._since.pop(view.name, None)
        if decided.resources:
            body = {"status": {"allocatable": decided.resources, "capacity": decided.resources}}
            self._core.patch_node_status(view.name, body)
        if decided.labels or decided.annotations:
            metadata = {}
            if decided.labels:
                metadata["labels"] = decided.labels
            if decided.annotations:
                metadata["annotations"] = decided.annotations
            self._core.patch_node(view.name, {"metadata": metadata})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--heartbeat", required=True, type=Path)
    args = parser.parse_args(argv)
    from kubernetes import config

    manager = Manager(config.new_client_from_config(config_file=args.kubeconfig))
    last_error = ""
    while True:
        try:
            manager.run_once(time.monotonic())
            args.heartbeat.touch()
            last_error = ""
        except Exception as error:  # the apiserver may be restarting; try again next pass
            if str(error) != last_error:  # once per kind of failure, not every half second
                print(f"sharing manager: {error}", flush=True)
            last_error = str(error)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main()
