"""Start, stop and inspect the devcluster: its components (``devcluster.components``) run as
detached processes, each with a pid file and a log in the state dir; ``devcluster.bootstrap``
writes what they read and installs what the cluster needs once its API server answers."""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config

from devcluster import (
    bootstrap,
    builder,
    gateway,
    gateway_api,
    kueue,
    nodes,
    processes,
    real_node,
    storage,
)
from devcluster.components import COMPONENTS, COMPONENTS_BY_NAME, Component, components
from devcluster.log import progress
from devcluster.settings import Settings, current

# Present while the running cluster was started by the pytest fixture (which may then stop it).
STARTED_BY_PYTEST_FLAG = "started-by-pytest"


@dataclass(frozen=True)
class NodeOptions:
    """How many simulated nodes `up` creates, and which GPU model they carry."""

    gpu_nodes: int = 4
    cpu_nodes: int = 2
    gpu_model: str = nodes.DEFAULT_GPU_MODEL
    gpus_per_node: int = nodes.DEFAULT_GPUS_PER_NODE
    second_gpu_nodes: int = 2
    second_gpu_model: str = nodes.DEFAULT_SECOND_GPU_MODEL
    # the GPU sharing nodes too (``nodes.sharing_node_specs``: `up --sharing`)
    sharing: bool = False

    @classmethod
    def from_env(cls, instance: int = 1) -> NodeOptions:
        """The node set from DEVCLUSTER_* variables, falling back to the instance's defaults
        (``instance_defaults``)."""
        defaults = cls.instance_defaults(instance)
        return cls(
            gpu_nodes=int(os.environ.get("DEVCLUSTER_GPU_NODES", defaults.gpu_nodes)),
            cpu_nodes=int(os.environ.get("DEVCLUSTER_CPU_NODES", defaults.cpu_nodes)),
            gpu_model=os.environ.get("DEVCLUSTER_GPU_MODEL", defaults.gpu_model),
            gpus_per_node=int(os.environ.get("DEVCLUSTER_GPUS_PER_NODE", defaults.gpus_per_node)),
            second_gpu_nodes=int(
                os.environ.get("DEVCLUSTER_SECOND_GPU_NODES", defaults.second_gpu_nodes)
            ),
            second_gpu_model=os.environ.get(
                "DEVCLUSTER_SECOND_GPU_MODEL", defaults.second_gpu_model
            ),
        )

    @classmethod
    def instance_defaults(cls, instance: int = 1) -> NodeOptions:
        """Instance 1: the standard node set. Any other instance: a smaller cluster of another
        GPU model (``SECOND_INSTANCE_NODES``), so that tests tell two clusters apart by their
        nodes, capacity and metrics."""
        return cls() if instance == 1 else SECOND_INSTANCE_NODES

    def specs(self) -> list[nodes.NodeSpec]:
        return nodes.default_node_specs(
            self.gpu_nodes,
            self.cpu_nodes,
            self.gpu_model,
            self.gpus_per_node,
            second_gpu_nodes=self.second_gpu_nodes,
            second_gpu_model=self.second_gpu_model,
        ) + (nodes.sharing_node_specs() if self.sharing else [])


# The node set of every instance but the first: 2 nodes of 4 L40S each (8 GPUs) and one CPU node.
SECOND_INSTANCE_NODES = NodeOptions(
    gpu_nodes=2,
    cpu_nodes=1,
    gpu_model="NVIDIA-L40S",
    gpus_per_node=4,
    second_gpu_nodes=0,
)


@contextmanager
def state_lock(settings: Settings) -> Iterator[None]:
    """Serialise up/down between processes sharing one state directory."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.state_dir / "lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def component_pid(settings: Settings, component: Component) -> int | None:
    return processes.running_pid(settings.run_dir, component.name, component.marker)


def component_states(settings: Settings) -> dict[str, tuple[int | None, bool]]:
    """For each component: its pid (None when not running) and whether it answers healthy."""
    states = {}
    for component in components(settings):
        pid = component_pid(settings, component)
        states[component.name] = (pid, pid is not None and component.healthy(settings))
    return states


def is_healthy(settings: Settings) -> bool:
    """True when every component is running and healthy."""
    for component in components(settings):
        if component_pid(settings, component) is None or not component.healthy(settings):
            return False
    return True


def admin_api_client(settings: Settings) -> client.ApiClient:
    """A kubernetes ApiClient authenticated as the cluster admin (system:masters)."""
    return config.new_client_from_config(config_file=str(settings.admin_kubeconfig))


def load_prometheus_rules(settings: Settings, text: str | None = None) -> None:
    """Write the rules file (``text``, or the portal's recording rules) and have the running
    Prometheus load it: a reload, not a restart, so other sessions' queries carry on."""
    with state_lock(settings):
        bootstrap.write_prometheus_config(settings)
        if text is not None:
            (
                settings.state_dir / "prometheus" / "rules" / bootstrap.PROMETHEUS_RULES_FILE
            ).write_text(text)
        request = urllib.request.Request(f"{settings.prometheus_url}/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def _start_and_wait(settings: Settings, components: list[Component]) -> None:
    """Start several components, then wait for all of them (they start in parallel)."""
    for component in components:
        env = component.env(settings) if component.env else None
        cwd = component.cwd(settings) if component.cwd else None
        pid = processes.start(
            settings.run_dir,
            settings.log_dir,
            component.name,
            component.command(settings),
            env=env,
            cwd=cwd,
        )
        progress(f"started {component.name} (pid {pid})")
    for component in components:

        def check(component: Component = component) -> bool:
            if component_pid(settings, component) is None:
                raise RuntimeError(
                    f"{component.name} exited during startup"
                    + processes.log_tail(settings.log_dir, component.name)
                )
            return component.healthy(settings)

        deadline = time.monotonic() + component.startup_timeout
        while not _guarded(check):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{component.name} not healthy after "
                    f"{component.startup_timeout:.0f}s"
                    + processes.log_tail(settings.log_dir, component.name)
                )
            time.sleep(0.2)
        progress(f"{component.name} is healthy")


def _guarded(check: Callable[[], bool]) -> bool:
    """Run a health check, letting RuntimeError (the process died) through."""
    try:
        return check()
    except RuntimeError:
        raise
    except Exception:  # anything else means "not ready yet"
        return False


def _ensure_ports_free(settings: Settings) -> None:
    busy = [
        f"{name}={port}" for name, port in settings.ports().items() if processes.port_in_use(port)
    ]
    if busy:
        raise RuntimeError(
            "devcluster ports already in use by something else: "
            + ", ".join(busy)
            + ". Stop it, or choose other ports with DEVCLUSTER_*_PORT (see devcluster/README.md)."
        )


def _wait_for_default_service_account(api: client.ApiClient, timeout: float = 60.0) -> None:
    """Pods are refused until the controller manager has made the namespace's `default` SA."""
    core = client.CoreV1Api(api)
    processes.wait_until(
        lambda: core.read_namespaced_service_account("default", "default") is not None,
        timeout,
        "the service-account controller to create default/default",
    )


def up(
    node_options: NodeOptions | None = None,
    reconcile_nodes_when_reused: bool = False,
    fresh: bool = False,
    instance: int | None = None,
) -> tuple[Settings, bool]:
    """Start the devcluster, or reuse a healthy one. Returns (settings, started_here).

    ``fresh`` applies only when a cluster is started here: it first discards what earlier runs
    left behind (see ``discard_cluster_data``). A running cluster is reused as it is.
    ``instance`` picks one of several clusters side by side (default DEVCLUSTER_INSTANCE, 1)."""
    settings = Settings.from_env(instance)
    with state_lock(settings):
        running = current(settings.instance)
        if _all_but_sharing_manager_healthy(running):
            # A cluster started before the sharing manager existed: add it, keep the rest.
            start_sharing_manager_locked(running)
        if is_healthy(running):
            progress(f"devcluster already running and healthy in {running.state_dir}; reusing it")
            if reconcile_nodes_when_reused and node_options is not None:
                nodes.reconcile(admin_api_client(running), node_options.specs())
            return running, False
        started = time.monotonic()
        # The cluster's binaries only: the demo's first start compiles nothing it does not run.
        builder.build(tools=False)
        _stop_all(running)
        (settings.state_dir / STARTED_BY_PYTEST_FLAG).unlink(missing_ok=True)
        _ensure_ports_free(settings)
        if fresh:
            discard_cluster_data(settings)
        try:
            _start_cluster(settings, node_options or NodeOptions.from_env(settings.instance))
        except BaseException:
            progress(f"startup failed; stopping what was started (logs in {settings.log_dir})")
            _stop_all(settings)
            raise
        progress(f"devcluster up in {time.monotonic() - started:.1f}s")
        return settings, True


def _all_but_sharing_manager_healthy(settings: Settings) -> bool:
    manager = COMPONENTS_BY_NAME["sharing-manager"]
    if component_pid(settings, manager) is not None:
        return False
    return all(
        component_pid(settings, c) is not None and c.healthy(settings)
        for c in components(settings)
        if c is not manager
    )


def start_sharing_manager_locked(settings: Settings) -> None:
    """Start the sharing manager on a running cluster: its credentials, RBAC and process."""
    bootstrap.prepare_credentials(settings)
    api = admin_api_client(settings)
    try:
        bootstrap.install_rbac(api)
    finally:
        api.close()
    _start_and_wait(settings, [COMPONENTS_BY_NAME["sharing-manager"]])


def restart_if_older_than_code(settings: Settings, name: str, sources: list[Path]) -> bool:
    """Restart a component (the DCGM simulator, the sharing manager) whose process started
    before its source files last changed, as a long-running cluster's may have; True if it was
    restarted (or started: it was not running)."""
    with state_lock(settings):
        component = COMPONENTS_BY_NAME[name]
        pid_file = processes.pid_file(settings.run_dir, name)
        newest = max(path.stat().st_mtime for path in sources)
        if component_pid(settings, component) is not None and pid_file.stat().st_mtime > newest:
            return False
        if name == "sharing-manager":
            processes.stop(settings.run_dir, component.name, component.marker)
            start_sharing_manager_locked(settings)
        else:
            restart_locked(settings, name)
        return True


def discard_cluster_data(settings: Settings) -> None:
    """Delete the stopped cluster's objects (etcd), metrics history (Prometheus), pod logs and
    volumes (the storage provisioner's directories).

    Pods and namespaces an earlier run left behind would otherwise hold GPUs again, and the
    series Prometheus scraped last time would stay visible for its 5-minute lookback beside the
    new ones. The CA, credentials and binaries are kept, so minted kubeconfigs stay valid."""
    # The storage provisioner's volumes go with the PersistentVolumes etcd held.
    for directory in (
        settings.etcd_data_dir,
        settings.prometheus_data_dir,
        settings.pod_logs_dir,
        storage.volumes_dir(settings),
    ):
        if directory.exists():
            shutil.rmtree(directory)
            progress(f"discarded {directory}")


def _start_cluster(settings: Settings, node_options: NodeOptions) -> None:
    """Start every component in dependency order and create the simulated nodes."""
    for directory in (settings.run_dir, settings.log_dir, settings.kubeconfig_dir):
        directory.mkdir(parents=True, exist_ok=True)
    bootstrap.prepare_credentials(settings)
    if settings.kueue:
        kueue.prepare(settings)
    bootstrap.write_prometheus_config(settings)
    bootstrap.write_pod_logs_config(settings)
    settings.record()
    _start_and_wait(settings, [COMPONENTS_BY_NAME["etcd"]])
    _start_and_wait(settings, [COMPONENTS_BY_NAME["kube-apiserver"]])
    api = admin_api_client(settings)
    bootstrap.install_rbac(api)
    bootstrap.install_logs_crd(api)
    if settings.kueue:
        kueue.install(api, settings)
    else:
        kueue.uninstall_hooks(api)
    if settings.gateway_api:
        gateway_api.install(api)
    else:
        gateway_api.uninstall(api)  # an etcd that had them keeps them otherwise
    after_apiserver = [c for c in components(settings) if c.name not in ("etcd", "kube-apiserver")]
    _start_and_wait(settings, after_apiserver)
    second = (
        f"{node_options.second_gpu_nodes} GPU ({node_options.second_gpu_model}), "
        if node_options.second_gpu_nodes
        else ""
    )
    progress(
        f"creating nodes: {node_options.gpu_nodes} GPU ({node_options.gpu_model}), "
        f"{second}{node_options.cpu_nodes} CPU-only"
    )
    nodes.recreate(api, node_options.specs())
    _wait_for_default_service_account(api)
    if settings.kueue:
        processes.wait_until(
            lambda: kueue.visibility_available(api), 60, "Kueue's visibility API to be available"
        )


def restart(settings: Settings, name: str) -> None:
    """Restart one component of a running cluster and wait until it is healthy again."""
    with state_lock(settings):
        restart_locked(settings, name)


def restart_locked(settings: Settings, name: str) -> None:
    """restart() for a caller that already holds state_lock."""
    component = COMPONENTS_BY_NAME[name]
    processes.stop(settings.run_dir, component.name, component.marker)
    _start_and_wait(settings, [component])


def start_real_node(settings: Settings) -> None:
    """Add the real node (devcluster/real_node.py) to the running cluster; idempotent."""
    with state_lock(settings):
        builder.build_tools(names=("containerd",))
        real_node.start(settings, _start_and_wait)


def start_gateway(settings: Settings) -> None:
    """Start the gateway that serves HTTPRoutes (devcluster/gateway.py); idempotent. Its
    routes lead to the real node's pods (the `gateway` fixture starts the node first)."""
    with state_lock(settings):
        builder.build_tools(names=("traefik",))
        api = admin_api_client(settings)
        try:
            gateway_api.install(api)
            gateway.start(settings, api, _start_and_wait)
        finally:
            api.close()


def start_storage(settings: Settings) -> str:
    """Start the storage provisioner and its default StorageClass (devcluster/storage.py);
    idempotent. Its volumes are on the real node (the `storage` fixture starts the node first).
    Returns the helper pods' image, which the node holds."""
    with state_lock(settings):
        builder.build_tools(names=("local-path-provisioner",))
        api = admin_api_client(settings)
        try:
            return storage.start(settings, api, _start_and_wait)
        finally:
            api.close()


def _stop_all(settings: Settings) -> list[str]:
    stopped = ["gateway"] if gateway.stop(settings) else []
    stopped += ["storage"] if storage.stop(settings) else []
    stopped += real_node.stop(settings)
    for component in reversed(COMPONENTS):
        if processes.stop(settings.run_dir, component.name, component.marker):
            stopped.append(component.name)
    return stopped


def down(purge: bool = False, instance: int | None = None) -> list[str]:
    """Stop every component and verify none is left; optionally delete the state directory."""
    settings = current(instance)
    with state_lock(settings):
        return down_locked(settings, purge)


def down_locked(settings: Settings, purge: bool = False) -> list[str]:
    """down() for a caller that already holds state_lock."""
    stopped = _stop_all(settings)
    (settings.state_dir / STARTED_BY_PYTEST_FLAG).unlink(missing_ok=True)
    for name in stopped:
        progress(f"stopped {name}")
    survivors = [
        component.name for component in COMPONENTS if component_pid(settings, component) is not None
    ]
    if survivors:
        raise RuntimeError(f"still running after down: {survivors}")
    if purge and settings.state_dir.exists():
        shutil.rmtree(settings.state_dir)
        progress(f"removed {settings.state_dir}")
    return stopped


def env_lines(settings: Settings) -> list[str]:
    """The shell lines `up` and `env` print."""
    return [
        f"export KUBECONFIG={shlex.quote(str(settings.admin_kubeconfig))}",
        f"export PROMETHEUS_URL={shlex.quote(settings.prometheus_url)}",
    ]
