"""A stand-in for NVIDIA's dcgm-exporter on the simulated GPU nodes.

Serves /metrics in the Prometheus text format with the DCGM exporter's metric names and labels for
every GPU of every node that has nvidia.com/gpu allocatable, and for every MIG instance and shared
GPU of the nodes whose GPUs the sharing manager partitioned or time-sliced (their
devcluster.gpuportal.io/*-config-applied annotations; see dcgm_metrics for the rules). Each
scrape reads the nodes and the Running pods from the apiserver (cached for a second), so GPU
attribution follows the cluster without a watch to keep in sync. The last assignment of each
node is kept in memory, so a GPU stays with its pod from scrape to scrape until the pod ends (a
restart starts afresh in creation order). The arithmetic is in devcluster.dcgm_metrics.

Run as: python -m devcluster.dcgm_simulator --kubeconfig PATH --port PORT
"""

from __future__ import annotations

import argparse
import dataclasses
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client, config

from devcluster import dcgm_metrics
from devcluster import gpu_sharing as gs
from devcluster.gpu_models import model_for
from devcluster.nodes import GPU_RESOURCE

CACHE_SECONDS = 1.0
Assignment = dict[int, dcgm_metrics.GpuHolder]


def _gpu_quantity(resources: client.V1ResourceRequirements | None, resource: str) -> int:
    if resources is None:
        return 0
    quantity = (resources.limits or {}).get(resource) or (resources.requests or {}).get(resource)
    return int(quantity) if quantity else 0


def pod_on_node(pod: client.V1Pod, resource: str = GPU_RESOURCE) -> dcgm_metrics.PodOnNode:
    """Reduce a Kubernetes pod to what assignment of `resource` (GPUs, MIG instances of one
    profile, shared GPU replicas) needs."""
    annotations = pod.metadata.annotations or {}
    return dcgm_metrics.PodOnNode(
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        created=pod.metadata.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        containers=tuple(
            dcgm_metrics.ContainerRequest(
                name=container.name, gpus=_gpu_quantity(container.resources, resource)
            )
            for container in pod.spec.containers
        ),
        utilisation=dcgm_metrics.parse_utilisation(
            annotations.get(dcgm_metrics.UTILISATION_ANNOTATION)
        ),
    )


class Collector:
    """Reads the cluster and renders the exposition, caching the result briefly."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        self._lock = threading.Lock()
        self._rendered = ""
        self._rendered_at = 0.0
        # (node, resource) -> the assignment of the last scrape, so that GPUs (MIG instances,
        # shared replicas) stay with their pods
        self._assignments: dict[tuple[str, str], Assignment] = {}
        self._previous: dict[tuple[str, str], Assignment] = {}

    def collect(self) -> str:
        with self._lock:
            if time.monotonic() - self._rendered_at > CACHE_SECONDS:
                self._rendered = dcgm_metrics.render_exposition(self._readings())
                self._rendered_at = time.monotonic()
            return self._rendered

    def _readings(self) -> list[dcgm_metrics.GpuReading]:
        pods_by_node: dict[str, list[client.V1Pod]] = defaultdict(list)
        for pod in self._core.list_pod_for_all_namespaces(
            field_selector="status.phase=Running"
        ).items:
            if pod.spec.node_name:
                pods_by_node[pod.spec.node_name].append(pod)
        readings = []
        self._previous, self._assignments = self._assignments, {}
        for node in sorted(self._core.list_node().items, key=lambda n: n.metadata.name):
            readings += self._node_readings(node, pods_by_node.get(node.metadata.name, []))
        return readings

    def _assign(self, node: str, resource: str, count: int, pods: list[client.V1Pod]) -> Assignment:
        """assign_gpus over `count` items of `resource`, remembering the result for the next
        scrape."""
        holders = dcgm_metrics.assign_gpus(
            count,
            [pod_on_node(pod, resource) for pod in pods],
            self._previous.get((node, resource)),
        )
        self._assignments[(node, resource)] = holders
        return holders

    def _node_readings(
        self, node: client.V1Node, pods: list[client.V1Pod]
    ) -> list[dcgm_metrics.GpuReading]:
        labels = node.metadata.labels or {}
        annotations = node.metadata.annotations or {}
        model = model_for(gs.base_product(labels.get(gs.PRODUCT_LABEL, "")))
        if "nvidia.com/gpu.memory" in labels:
            model = dataclasses.replace(model, memory_mib=int(labels["nvidia.com/gpu.memory"]))
        name = node.metadata.name
        mig_config = annotations.get(gs.MIG_APPLIED_ANNOTATION)
        device_plugin_config = annotations.get(gs.DEVICE_PLUGIN_APPLIED_ANNOTATION)
        shape = None
        if mig_config is not None or device_plugin_config is not None:
            try:
                shape = gs.node_shape(
                    labels.get(gs.PRODUCT_LABEL, ""),
                    int(labels.get(gs.GPU_COUNT_LABEL, "0")),
                    mig_config,
                    device_plugin_config,
                )
            except (gs.UnknownConfig, ValueError):
                shape = None
        if shape is None:  # a plain node: its allocatable nvidia.com/gpu, as always
            gpu_count = int((node.status.allocatable or {}).get(GPU_RESOURCE, 0) or 0)
            if not gpu_count:
                return []
            holders = self._assign(name, GPU_RESOURCE, gpu_count, pods)
            return dcgm_metrics.gpu_readings(name, model, gpu_count, holders)
        # The configs are uniform: every GPU is partitioned, or none is.
        whole = sum(1 for layout in shape.layouts if layout is None)
        if whole and shape.replicas > 1:
            holders = self._assign(name, gs.SHARED_GPU_RESOURCE, whole * shape.replicas, pods)
            return dcgm_metrics.shared_gpu_readings(name, model, whole, shape.replicas, holders)
        if whole:
            holders = self._assign(name, GPU_RESOURCE, whole, pods)
            return dcgm_metrics.gpu_readings(name, model, whole, holders)
        profiles = gs.profiles_for(model.product_label)
        instances = dcgm_metrics.mig_instances(shape.layouts, profiles)
        by_profile = {}
        for profile in {instance.profile for instance in instances}:
            count = sum(1 for instance in instances if instance.profile == profile)
            by_profile[profile.name] = self._assign(name, profile.resource, count, pods)
        return dcgm_metrics.mig_readings(name, model, instances, by_profile)


def make_handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server dispatches to
            if self.path.split("?")[0] not in ("/metrics", "/healthz"):
                self.send_error(404)
                return
            try:
                body = collector.collect()
            except Exception as error:  # report any failure to the scraper
                self.send_error(503, f"cannot read the cluster: {error}")
                return
            if self.path.startswith("/healthz"):
                body = "ok\n"
            payload = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:  #
            """Scrapes every few seconds would flood the log; stay quiet."""

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--port", type=int, default=29400)
    parser.add_argument("--address", default="127.0.0.1")
    args = parser.parse_args(argv)
    collector = Collector(config.new_client_from_config(config_file=args.kubeconfig))
    server = ThreadingHTTPServer((args.address, args.port), make_handler(collector))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
