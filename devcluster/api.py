"""The Python face of the devcluster, as used by the pytest fixture and by scripts.

handle = devcluster.api.up()          # or DevCluster(current()) for one already running
handle.api_client()                   # kubernetes ApiClient as the admin
handle.mint("alice", ["team-a"])      # kubeconfig path for a user
handle.add_gpu_node(gpus=8)           # another simulated GPU node
handle.write_pod_log("ns", "pod", ["epoch 1"])  # what `kubectl logs ns/pod` will show
with handle.kueue_stopped(): ...      # Kueue down for a moment (jobs stay suspended)
with handle.gateway_api_removed(): ...  # no Gateway API CRDs for a moment
handle.ensure_gateway_api()           # the Gateway API CRDs, on a cluster started without
with handle.tenant_metrics(text): ...  # a tenant's pod publishing metrics, scraped meanwhile
GpuSharing(handle.settings).add()     # the GPU sharing nodes (MIG, time-sliced, sharable)
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from devcluster import backfill as backfill_module
from devcluster import (
    cluster,
    components,
    credentials,
    gateway_api,
    kueue,
    nodes,
    podlogs,
    processes,
    tenant_metrics,
)
from devcluster import gateway as gateway_module
from devcluster import real_node as real_node_module
from devcluster import storage as storage_module
from devcluster.gpu_models import DEFAULT_GPU_MODEL
from devcluster.settings import Settings, current

PROMETHEUS_RESTART_GRACE_SECONDS = 30.0


@dataclass
class DevCluster:
    """A handle on a running devcluster."""

    settings: Settings
    started_here: bool = False

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (user devcluster-admin in group system:masters)."""
        return self.settings.admin_kubeconfig

    @property
    def prometheus_url(self) -> str:
        return self.settings.prometheus_url

    def api_client(self) -> client.ApiClient:
        """A new kubernetes ApiClient authenticated as the admin."""
        return cluster.admin_api_client(self.settings)

    def mint(self, user: str, groups: list[str] | tuple[str, ...] = ()) -> Path:
        """Kubeconfig path for a client certificate with CN=user and O=each group."""
        return credentials.mint(user, groups, settings=self.settings)

    def add_gpu_node(
        self,
        name: str | None = None,
        gpus: int = nodes.DEFAULT_GPUS_PER_NODE,
        gpu_model: str = DEFAULT_GPU_MODEL,
        labels: dict[str, str] | None = None,
        wait: bool = True,
    ) -> str:
        """Add a simulated GPU node (Ready for scheduling when wait is true); returns its name."""
        name = name or f"gpu-node-extra-{uuid.uuid4().hex[:6]}"
        spec = nodes.NodeSpec(
            name=name, gpus=gpus, gpu_model=gpu_model, extra_labels=dict(labels or {})
        )
        api = self.api_client()
        nodes.create_node(api, spec)
        if wait:
            nodes.wait_for_ready(api, [name])
        return name

    def add_cpu_node(
        self, name: str | None = None, labels: dict[str, str] | None = None, wait: bool = True
    ) -> str:
        """Add a simulated CPU-only node; returns its name."""
        name = name or f"cpu-node-extra-{uuid.uuid4().hex[:6]}"
        api = self.api_client()
        nodes.create_node(api, nodes.NodeSpec(name=name, extra_labels=dict(labels or {})))
        if wait:
            nodes.wait_for_ready(api, [name])
        return name

    @contextmanager
    def apiserver_stopped(self) -> Iterator[None]:
        """Stop kube-apiserver for the duration of the block, then start it and wait until it
        is ready again (etcd and the other components keep running).

        The state lock is held meanwhile, so another session's `up` waits rather than take the
        stopped apiserver for a broken cluster and restart everything. Keep the block short:
        other sessions sharing the cluster see the outage too.
        """
        with self._stopped("kube-apiserver"):
            yield

    @contextmanager
    def kueue_stopped(self) -> Iterator[None]:
        """Stop Kueue for the duration of the block, then start it and wait until it is ready
        again (its webhooks answer and the visibility API is available).

        While Kueue is down its webhooks fail closed, so the API server refuses to create or
        change any Job in the cluster; other sessions sharing the cluster see that too, so
        keep the block short. The state lock is held meanwhile, as for apiserver_stopped."""

        def visibility_api_available() -> None:
            with self.api_client() as api:
                processes.wait_until(
                    lambda: kueue.visibility_available(api),
                    60,
                    "Kueue's visibility API to be available",
                )

        with self._stopped("kueue", then=visibility_api_available):
            yield

    def ensure_gateway_api(self) -> None:
        """The Gateway API's CRDs, installed if the cluster lacks them (one started by an
        older checkout, or without them). Applying them again changes nothing."""
        with self.api_client() as api:
            if not gateway_api.serves_http_routes(api):
                gateway_api.install(api)

    @contextmanager
    def gateway_api_removed(self) -> Iterator[None]:
        """No Gateway API CRDs for the block (every HTTPRoute goes with them); installed again
        after it. Under the state lock: other sessions sharing the cluster see it too."""
        with (
            cluster.state_lock(self.settings),
            self.api_client() as api,
            gateway_api.removed(api),
        ):
            yield

    @contextmanager
    def _stopped(self, name: str, then: Callable[[], None] | None = None) -> Iterator[None]:
        """One component down for the block, under the state lock; started again (and `then`
        run) whatever the block does."""
        component = components.COMPONENTS_BY_NAME[name]
        with cluster.state_lock(self.settings):
            processes.stop(self.settings.run_dir, component.name, component.marker)
            try:
                yield
            finally:
                cluster._start_and_wait(self.settings, [component])
                if then is not None:
                    then()

    def remove_node(self, name: str, wait: bool = True) -> None:
        """Delete a simulated node (pods bound to it are garbage-collected by the cluster)."""
        api = self.api_client()
        nodes.delete_node(api, name)
        if wait:
            nodes.wait_for_deleted(api, name)

    def prometheus_query(self, promql: str, at: float | None = None) -> list[dict]:
        """Run an instant PromQL query and return the result vector.

        Connection errors are retried for a while: `backfill` restarts Prometheus, and another
        test session sharing the cluster may be doing that right now.
        """
        params = {"query": promql}
        if at is not None:
            params["time"] = str(at)
        url = f"{self.prometheus_url}/api/v1/query?{urllib.parse.urlencode(params)}"
        deadline = time.monotonic() + PROMETHEUS_RESTART_GRACE_SECONDS
        while True:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = json.loads(response.read())
                break
            except urllib.error.URLError as error:
                starting = isinstance(error, urllib.error.HTTPError) and error.code == 503
                down = isinstance(error.reason, ConnectionError)
                if not (starting or down) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus query failed: {body}")
        return body["data"]["result"]

    def write_pod_log(
        self, namespace: str, pod: str, lines: list[str] | tuple[str, ...], container: str = "main"
    ) -> Path:
        """Append lines to a simulated container's log, which the API server's ``pods/log``
        then serves through kwok (tail, follow and all); returns the log file. The first call
        for a container points its pod's kwok ``Logs`` object at the file."""
        path = podlogs.log_path(self.settings.pod_logs_dir, namespace, pod, container)
        is_new = not path.exists()
        podlogs.append_lines(path, lines)
        if is_new:
            files = {log.stem: log for log in path.parent.glob("*.log")}
            body = podlogs.logs_object(namespace, pod, files)
            with self.api_client() as api:
                objects = client.CustomObjectsApi(api)
                args = (podlogs.GROUP, podlogs.VERSION, namespace, podlogs.LOGS_PLURAL)
                try:
                    objects.create_namespaced_custom_object(*args, body)
                except client.ApiException as error:
                    if error.status != 409:
                        raise
                    current_object = objects.get_namespaced_custom_object(*args, pod)
                    body["metadata"]["resourceVersion"] = current_object["metadata"][
                        "resourceVersion"
                    ]
                    objects.replace_namespaced_custom_object(*args, pod, body)
        return path

    def tenant_metrics(self, text: str) -> AbstractContextManager[str]:
        """Prometheus scrapes ``text`` (exposition format) as a tenant's pod while the block
        runs, under the ``tenant-pods`` job (see devcluster.tenant_metrics); yields the
        target's address once scraped."""
        return tenant_metrics.published(self.settings, text)

    def backfill(
        self,
        spec: backfill_module.BackfillSpec,
        restart_prometheus: bool = True,
        *,
        writer: str = "promtool",
    ) -> backfill_module.BackfillResult:
        """Load deterministic DCGM history into Prometheus (see devcluster.backfill)."""
        return backfill_module.backfill(
            spec, restart_prometheus=restart_prometheus, settings=self.settings, writer=writer
        )

    def load_prometheus_rules(self, text: str | None = None) -> None:
        """Have Prometheus load a rules file (``text``), or again the portal's recording rules
        it starts with; by a reload, so a cluster started before the rules existed gets them."""
        cluster.load_prometheus_rules(self.settings, text)

    def backfill_rules(self, *, start: int, end: int) -> list[Path]:
        """Evaluate the loaded rules over past history (see devcluster.backfill.backfill_rules);
        Prometheus finds the blocks at its next reload, within a minute."""
        return backfill_module.backfill_rules(start=start, end=end, settings=self.settings)


def up(
    node_options: cluster.NodeOptions | None = None,
    fresh: bool = False,
    instance: int | None = None,
) -> DevCluster:
    """Start the devcluster (or reuse a healthy one) and return a handle on it; ``fresh`` and
    ``instance`` (one of several clusters side by side) as in ``cluster.up``."""
    settings, started_here = cluster.up(node_options, fresh=fresh, instance=instance)
    return DevCluster(settings=settings, started_here=started_here)


def running(instance: int | None = None) -> DevCluster | None:
    """A handle on the devcluster in DEVCLUSTER_STATE (of ``instance``, default
    DEVCLUSTER_INSTANCE) if it is running and healthy."""
    settings = current(instance)
    return DevCluster(settings=settings) if cluster.is_healthy(settings) else None


def down(purge: bool = False, instance: int | None = None) -> list[str]:
    """Stop the devcluster; returns the components that were running."""
    return cluster.down(purge=purge, instance=instance)


@dataclass(frozen=True)
class RealNode:
    """The devcluster's node that runs real containers (devcluster/real_node.py). A pod lands
    there with ``node_selector`` and ``toleration``; its images come from podman's store
    through ``load_image`` (nothing is pulled)."""

    settings: Settings
    name: str = real_node_module.REAL_NODE_NAME
    pod_subnet: str = real_node_module.POD_SUBNET

    @property
    def node_selector(self) -> dict[str, str]:
        return {real_node_module.LABEL: "true"}

    @property
    def toleration(self) -> dict[str, str]:
        return dict(real_node_module.TOLERATION)

    @property
    def address(self) -> str:
        """The node's IP, the host's: where pods reach the host's own services."""
        return real_node_module.node_ip()

    def load_image(self, name: str) -> None:
        real_node_module.load_image(self.settings, name)

    def ensure_image(self, name: str) -> None:
        """``load_image`` unless the node holds that very image already."""
        real_node_module.ensure_image(self.settings, name)


@dataclass(frozen=True)
class Gateway:
    """The devcluster's gateway (devcluster/gateway.py): Traefik serving the HTTPRoutes
    attached to the Gateway ``reference`` at ``url`` (send the route's hostname as Host)."""

    settings: Settings
    reference: str = gateway_module.REFERENCE
    url: str = f"http://127.0.0.1:{gateway_module.PORT}"


@dataclass(frozen=True)
class Storage:
    """The devcluster's storage provisioner (devcluster/storage.py): claims of
    ``storage_class`` (the cluster's default) get a directory under ``volumes_dir`` on the real
    node. ``helper_image`` (the Debian base, which the node holds) serves tests as a small
    image with sh and Python."""

    settings: Settings
    helper_image: str
    storage_class: str = storage_module.STORAGE_CLASS
    provisioner: str = storage_module.PROVISIONER

    @property
    def volumes_dir(self) -> Path:
        return storage_module.volumes_dir(self.settings)


@dataclass(frozen=True)
class GpuSharing:
    """The GPU sharing nodes (``nodes.sharing_node_specs``) beside the default ones, with the
    sharing manager reconfiguring them (devcluster/sharing_manager.py):

    * ``mig_node`` (gpu-node-mig-0): 2 x A100-80GB as ``all-1g.10gb``, 14 x nvidia.com/mig-1g.10gb;
    * ``shared_node`` (gpu-node-shared-0): 2 x A100-80GB as ``time-slicing-4``,
      8 x nvidia.com/gpu.shared;
    * ``sharable_node`` (gpu-node-sharable-0): 2 whole A100-80GB (``all-disabled``, no sharing
      config), for a test to repartition through its labels.

    All carry hardware-type=gpu and the nvidia.com/gpu taint, as every simulated GPU node."""

    settings: Settings
    mig_node: str = nodes.MIG_NODE
    shared_node: str = nodes.SHARED_NODE
    sharable_node: str = nodes.SHARABLE_NODE

    @property
    def names(self) -> list[str]:
        return [self.mig_node, self.shared_node, self.sharable_node]

    def add(self) -> None:
        """Create the nodes afresh (replacing any of that name) and wait until they are Ready."""
        api = cluster.admin_api_client(self.settings)
        try:
            self._delete(api)
            for spec in nodes.sharing_node_specs():
                nodes.create_node(api, spec)
            nodes.wait_for_ready(api, self.names)
        finally:
            api.close()

    def remove(self) -> None:
        """Delete the nodes and wait until they are gone."""
        api = cluster.admin_api_client(self.settings)
        try:
            self._delete(api)
        finally:
            api.close()

    def _delete(self, api: client.ApiClient) -> None:
        for name in self.names:
            nodes.delete_node(api, name)
        for name in self.names:
            nodes.wait_for_deleted(api, name)

    def read_node(self, name: str) -> client.V1Node:
        api = cluster.admin_api_client(self.settings)
        try:
            return client.CoreV1Api(api).read_node(name)
        finally:
            api.close()

    def wait_for_allocatable(
        self, node: str, resource: str, count: int, timeout: float = 30.0
    ) -> client.V1Node:
        """Wait until the node's allocatable `resource` is `count` (0: also when absent);
        returns the node."""

        def check() -> client.V1Node | None:
            read = self.read_node(node)
            if int((read.status.allocatable or {}).get(resource, 0) or 0) == count:
                return read
            return None

        return self._wait(check, timeout, f"{node} to have {count} x {resource}")

    def wait_for_label(
        self, node: str, label: str, value: str | None, timeout: float = 30.0
    ) -> client.V1Node:
        """Wait until the node's label is `value` (None: absent), e.g.
        nvidia.com/mig.config.state=success; returns the node."""

        def check() -> client.V1Node | None:
            read = self.read_node(node)
            return read if (read.metadata.labels or {}).get(label) == value else None

        return self._wait(check, timeout, f"{node} to have {label}={value}")

    @staticmethod
    def _wait(check: Callable[[], client.V1Node | None], timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.2)
