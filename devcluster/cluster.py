"""Start, stop and inspect the devcluster: etcd, the Kubernetes control plane, kwok, Kueue, the
DCGM simulator and Prometheus, each a detached process with a pid file and a log in the state
dir."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client, config

from devcluster import (
    builder,
    gateway_api,
    kubeconfig,
    kueue,
    nodes,
    pki,
    podlogs,
    processes,
    tenant_metrics,
)
from devcluster.log import progress
from devcluster.settings import Settings, current
from monitoring import promql
from portal.validators import LabelMatcher

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
REPO_ROOT = Path(__file__).resolve().parent.parent
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
# Retention long enough that backfilled history (days to months old) is not deleted on load.
PROMETHEUS_RETENTION = "400d"
# The portal's recording rules, loaded from <state>/prometheus/rules/ (see prometheus_rules).
PROMETHEUS_RULES_FILE = "gpu-portal.yml"
DCGM_SIMULATOR_ROLE = "devcluster:dcgm-simulator"
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

    @classmethod
    def from_env(cls) -> NodeOptions:
        return cls(
            gpu_nodes=int(os.environ.get("DEVCLUSTER_GPU_NODES", cls.gpu_nodes)),
            cpu_nodes=int(os.environ.get("DEVCLUSTER_CPU_NODES", cls.cpu_nodes)),
            gpu_model=os.environ.get("DEVCLUSTER_GPU_MODEL", cls.gpu_model),
            gpus_per_node=int(os.environ.get("DEVCLUSTER_GPUS_PER_NODE", cls.gpus_per_node)),
            second_gpu_nodes=int(
                os.environ.get("DEVCLUSTER_SECOND_GPU_NODES", cls.second_gpu_nodes)
            ),
            second_gpu_model=os.environ.get("DEVCLUSTER_SECOND_GPU_MODEL", cls.second_gpu_model),
        )

    def specs(self) -> list[nodes.NodeSpec]:
        return nodes.default_node_specs(
            self.gpu_nodes,
            self.cpu_nodes,
            self.gpu_model,
            self.gpus_per_node,
            second_gpu_nodes=self.second_gpu_nodes,
            second_gpu_model=self.second_gpu_model,
        )


@dataclass(frozen=True)
class Component:
    """One process of the cluster: how to start it and how to tell that it is healthy."""

    name: str
    marker: str  # a string its command line must contain (guards against recycled pids)
    command: Callable[[Settings], list[str]]
    healthy: Callable[[Settings], bool]
    startup_timeout: float = 60.0
    env: Callable[[Settings], dict[str, str]] | None = None
    cwd: Callable[[Settings], Path] | None = None


def _http_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return response.status == 200
    except OSError:
        return False


def _cluster_ca_context(settings: Settings) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(settings.pki_dir / "ca.crt"))


def _self_signed_context() -> ssl.SSLContext:
    """kube-controller-manager and kube-scheduler serve /healthz with a self-generated cert."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _bin(name: str) -> str:
    return str(builder.binary(name))


def _prometheus_binary() -> str:
    found = os.environ.get("DEVCLUSTER_PROMETHEUS_BIN") or shutil.which("prometheus")
    if not found:
        raise RuntimeError(
            "prometheus not found: apt-get install prometheus (or set DEVCLUSTER_PROMETHEUS_BIN)"
        )
    return found


def _kubeconfig_path(settings: Settings, component: str) -> str:
    return str(settings.kubeconfig_dir / f"{component}.kubeconfig")


def _etcd_command(s: Settings) -> list[str]:
    return [
        _bin("etcd"),
        "--name=devcluster",
        f"--data-dir={s.etcd_data_dir}",
        f"--listen-client-urls={s.etcd_url}",
        f"--advertise-client-urls={s.etcd_url}",
        f"--listen-peer-urls=http://127.0.0.1:{s.etcd_peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{s.etcd_peer_port}",
        f"--initial-cluster=devcluster=http://127.0.0.1:{s.etcd_peer_port}",
        # A throwaway development store: skipping fsync keeps the shared disk out of the way.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def _etcd_healthy(s: Settings) -> bool:
    try:
        with urllib.request.urlopen(f"{s.etcd_url}/health", timeout=2) as response:
            return json.loads(response.read()).get("health") == "true"
    except (OSError, ValueError):
        return False


def _apiserver_command(s: Settings) -> list[str]:
    pki_dir = s.pki_dir
    return [
        _bin("kube-apiserver"),
        f"--etcd-servers={s.etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={s.apiserver_port}",
        f"--cert-dir={s.run_dir / 'apiserver'}",
        f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
        f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
        f"--client-ca-file={pki_dir / 'ca.crt'}",
        f"--requestheader-client-ca-file={pki_dir / 'front-proxy-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki_dir / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki_dir / 'front-proxy-client.key'}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,"
        "DefaultTolerationSeconds,TaintNodesByCondition,Priority,NodeRestriction,ResourceQuota",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki_dir / 'sa.pub'}",
        f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        # There are no real pods to reach the apiserver, and a loopback address is not a valid
        # endpoint for the `kubernetes` Service, so do not maintain its endpoints.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        # kwok gives each node a Hostname address too, which nothing resolves.
        "--kubelet-preferred-address-types=InternalIP",
        "--profiling=false",
    ]


def _apiserver_healthy(s: Settings) -> bool:
    return _http_ok(f"{s.apiserver_url}/readyz", _cluster_ca_context(s))


def _delegating_auth_flags(s: Settings, component: str) -> list[str]:
    path = _kubeconfig_path(s, component)
    return [
        f"--kubeconfig={path}",
        f"--authentication-kubeconfig={path}",
        f"--authorization-kubeconfig={path}",
    ]


def _controller_manager_command(s: Settings) -> list[str]:
    pki_dir = s.pki_dir
    return [
        _bin("kube-controller-manager"),
        *_delegating_auth_flags(s, "controller-manager"),
        "--bind-address=127.0.0.1",
        f"--secure-port={s.controller_manager_port}",
        f"--cert-dir={s.run_dir / 'controller-manager'}",
        "--leader-elect=false",
        "--controllers=*",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki_dir / 'sa.key'}",
        f"--root-ca-file={pki_dir / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki_dir / 'ca.crt'}",
        f"--cluster-signing-key-file={pki_dir / 'ca.key'}",
        "--cluster-name=gpuportal-devcluster",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        # Tests create and delete many objects; the default client rate limits slow them down.
        "--kube-api-qps=100",
        "--kube-api-burst=200",
        "--profiling=false",
    ]


def _scheduler_command(s: Settings) -> list[str]:
    return [
        _bin("kube-scheduler"),
        *_delegating_auth_flags(s, "scheduler"),
        "--bind-address=127.0.0.1",
        f"--secure-port={s.scheduler_port}",
        f"--cert-dir={s.run_dir / 'scheduler'}",
        "--leader-elect=false",
        "--profiling=false",
    ]


def _kwok_command(s: Settings) -> list[str]:
    return [
        _bin("kwok"),
        f"--kubeconfig={_kubeconfig_path(s, 'kwok')}",
        f"--config={ASSETS_DIR / 'kwok-stages.yaml'}",
        f"--config={_kwok_logs_config(s)}",
        "--enable-crds=Logs",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}=fake",
        "--cidr=10.244.0.1/16",
        # Every simulated node's kubelet is kwok's own server: the API server sends pods/log
        # (and exec, port-forward) for any node to 127.0.0.1:<kwok port> over TLS.
        "--node-ip=127.0.0.1",
        f"--node-port={s.kwok_port}",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{s.kwok_port}",
        f"--tls-cert-file={s.pki_dir / 'kwok.crt'}",
        f"--tls-private-key-file={s.pki_dir / 'kwok.key'}",
    ]


def _kwok_logs_config(s: Settings) -> Path:
    return s.state_dir / "kwok-logs.yaml"


def _write_pod_logs_config(settings: Settings) -> None:
    """The default log every simulated container serves, and kwok's rule pointing at it."""
    default_log = settings.pod_logs_dir / "default.log"
    default_log.unlink(missing_ok=True)
    podlogs.append_lines(default_log, podlogs.DEFAULT_LINES)
    _kwok_logs_config(settings).write_text(
        yaml.safe_dump(podlogs.cluster_logs_rule(default_log), sort_keys=False)
    )


def _kwok_env(s: Settings) -> dict[str, str]:
    # kwok reads and writes ~/.kwok; keep it inside the state directory.
    return {**os.environ, "HOME": str(s.kwok_home)}


def _dcgm_command(s: Settings) -> list[str]:
    return [
        sys.executable,
        "-m",
        "devcluster.dcgm_simulator",
        f"--kubeconfig={_kubeconfig_path(s, 'dcgm-simulator')}",
        f"--port={s.dcgm_port}",
    ]


def _dcgm_env(s: Settings) -> dict[str, str]:
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": python_path}


def _prometheus_command(s: Settings) -> list[str]:
    return [
        _prometheus_binary(),
        f"--config.file={s.state_dir / 'prometheus' / 'prometheus.yml'}",
        f"--storage.tsdb.path={s.prometheus_data_dir}",
        f"--storage.tsdb.retention.time={PROMETHEUS_RETENTION}",
        f"--web.listen-address=127.0.0.1:{s.prometheus_port}",
        "--web.enable-lifecycle",
        "--web.enable-admin-api",
    ]


COMPONENTS = (
    Component("etcd", "--name=devcluster", _etcd_command, _etcd_healthy),
    Component(
        "kube-apiserver",
        "kube-apiserver",
        _apiserver_command,
        _apiserver_healthy,
        startup_timeout=120,
    ),
    Component(
        "kube-controller-manager",
        "kube-controller-manager",
        _controller_manager_command,
        lambda s: _http_ok(
            f"https://127.0.0.1:{s.controller_manager_port}/healthz", _self_signed_context()
        ),
    ),
    Component(
        "kube-scheduler",
        "kube-scheduler",
        _scheduler_command,
        lambda s: _http_ok(f"https://127.0.0.1:{s.scheduler_port}/healthz", _self_signed_context()),
    ),
    Component(
        "kwok",
        "kwok",
        _kwok_command,
        lambda s: _http_ok(f"https://127.0.0.1:{s.kwok_port}/healthz", _cluster_ca_context(s)),
        env=_kwok_env,
    ),
    Component(
        "kueue",
        "kueue --config=",
        kueue.command,
        lambda s: _http_ok(f"http://127.0.0.1:{s.kueue_health_port}/readyz"),
        # Kueue finds its metrics and visibility certificates relative to it (see builder.py).
        cwd=lambda s: s.kueue_dir,
    ),
    Component(
        "dcgm-simulator",
        "devcluster.dcgm_simulator",
        _dcgm_command,
        lambda s: _http_ok(f"{s.dcgm_url}/healthz"),
        env=_dcgm_env,
    ),
    Component(
        "prometheus",
        "prometheus",
        _prometheus_command,
        lambda s: _http_ok(f"{s.prometheus_url}/-/ready"),
    ),
)
COMPONENTS_BY_NAME = {component.name: component for component in COMPONENTS}


def components(settings: Settings) -> list[Component]:
    """The components this cluster runs: all of them, less Kueue when it is switched off."""
    return [c for c in COMPONENTS if c.name != "kueue" or settings.kueue]


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


def _prepare_credentials(settings: Settings) -> None:
    """The CA, the apiserver's serving cert, service-account keys and component kubeconfigs."""
    ca = pki.ensure_ca(settings.pki_dir)
    pki.ensure_service_account_keys(settings.pki_dir)
    pki.ensure_issued(
        ca,
        settings.pki_dir,
        "apiserver",
        "kube-apiserver",
        server_names=[
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        server_ips=["127.0.0.1", KUBERNETES_SERVICE_IP],
    )
    pki.ensure_issued(ca, settings.pki_dir, "kwok", "kwok", server_names=["localhost"],
                      server_ips=["127.0.0.1"])  # fmt: skip
    front_proxy_ca = pki.ensure_ca(settings.pki_dir, "front-proxy-ca", "front-proxy-ca")
    pki.ensure_issued(front_proxy_ca, settings.pki_dir, "front-proxy-client", "front-proxy-client")
    identities = {
        # component: (user name, groups)
        "admin": ("devcluster-admin", ["system:masters"]),
        "controller-manager": ("system:kube-controller-manager", []),
        "scheduler": ("system:kube-scheduler", []),
        # kwok plays every kubelet (node status, leases, pod status, deletes), so it is admin.
        "kwok": ("devcluster:kwok", ["system:masters"]),
        "dcgm-simulator": (DCGM_SIMULATOR_ROLE, []),
    }
    for component, (user, groups) in identities.items():
        path = (
            settings.admin_kubeconfig
            if component == "admin"
            else settings.kubeconfig_dir / f"{component}.kubeconfig"
        )
        pair = pki.ensure_issued(ca, settings.pki_dir / "clients", component, user, groups)
        if not path.exists():
            kubeconfig.write(path, settings.apiserver_url, ca.cert, pair, user)
        else:
            _point_kubeconfig_at(path, settings.apiserver_url)


def _point_kubeconfig_at(path: Path, server: str) -> None:
    """Keep an existing kubeconfig's credentials but follow a changed apiserver port."""
    document = yaml.safe_load(path.read_text())
    for cluster in document.get("clusters", []):
        cluster["cluster"]["server"] = server
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def _write_prometheus_config(settings: Settings) -> None:
    interval = f"{settings.scrape_interval_seconds}s"
    directory = settings.state_dir / "prometheus"
    directory.mkdir(parents=True, exist_ok=True)
    settings.prometheus_data_dir.mkdir(parents=True, exist_ok=True)
    (directory / "prometheus.yml").write_text(
        "# Written by `python -m devcluster up`; edits are overwritten.\n"
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  evaluation_interval: {interval}\n"
        "scrape_configs:\n"
        "  - job_name: dcgm-exporter\n"
        "    honor_labels: true\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{settings.dcgm_port}']\n"
        "  - job_name: prometheus\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{settings.prometheus_port}']\n"
        + tenant_metrics.scrape_config(settings)
        + "rule_files:\n"
        + f"  - {directory / 'rules' / '*.yml'}\n"
    )
    rules = directory / "rules" / PROMETHEUS_RULES_FILE
    rules.parent.mkdir(exist_ok=True)
    rules.write_text(yaml.safe_dump(prometheus_rules(), sort_keys=False))


# What only the simulator's series carry: the job it is scraped as (tenant pods' series are
# job="tenant-pods"), as a portal Cluster pins its DCGM queries by default.
DCGM_EXPORTER_PIN = (LabelMatcher("job", "=", "dcgm-exporter"),)


def prometheus_rules() -> dict:
    """The portal's recording rules (``monitoring.promql``, as its cluster-wide export carries
    them) for the simulator's label layout, its exporter pin and both utilisation metrics it
    publishes."""
    configs = [
        promql.MetricsConfig(utilisation_metric=metric, exporter=DCGM_EXPORTER_PIN)
        for metric in (promql.GPU_UTIL, promql.GR_ENGINE_ACTIVE)
    ]
    return {
        "groups": [
            {
                "name": f"gpu-portal-recording-{config.utilisation_metric.lower()}",
                "rules": promql.recording_rules(config),
            }
            for config in configs
        ]
    }


def load_prometheus_rules(settings: Settings, text: str | None = None) -> None:
    """Write the rules file (``text``, or the portal's recording rules) and have the running
    Prometheus load it: a reload, not a restart, so other sessions' queries carry on."""
    with state_lock(settings):
        _write_prometheus_config(settings)
        if text is not None:
            (settings.state_dir / "prometheus" / "rules" / PROMETHEUS_RULES_FILE).write_text(text)
        request = urllib.request.Request(f"{settings.prometheus_url}/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def _install_logs_crd(api: client.ApiClient, timeout: float = 60.0) -> None:
    """kwok's ``Logs`` resource, established before kwok starts watching it."""
    extensions = client.ApiextensionsV1Api(api)
    crd = podlogs.logs_crd()
    try:
        extensions.create_custom_resource_definition(crd)
    except client.ApiException as error:
        if error.status != 409:
            raise

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(
            crd["metadata"]["name"]
        ).status.conditions
        return any(c.type == "Established" and c.status == "True" for c in conditions or [])

    processes.wait_until(established, timeout, "kwok's Logs resource to be established")


def _bootstrap_rbac(api: client.ApiClient) -> None:
    """Let the DCGM simulator read nodes and pods, and nothing else."""
    rbac = client.RbacAuthorizationV1Api(api)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": DCGM_SIMULATOR_ROLE},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]}
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": DCGM_SIMULATOR_ROLE},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": DCGM_SIMULATOR_ROLE,
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DCGM_SIMULATOR_ROLE}
        ],
    }
    for create, replace, body in (
        (rbac.create_cluster_role, rbac.replace_cluster_role, role),
        (rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding, binding),
    ):
        try:
            create(body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            replace(body["metadata"]["name"], body)


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
) -> tuple[Settings, bool]:
    """Start the devcluster, or reuse a healthy one. Returns (settings, started_here).

    ``fresh`` applies only when a cluster is started here: it first discards what earlier runs
    left behind (see ``discard_cluster_data``). A running cluster is reused as it is."""
    settings = Settings.from_env()
    with state_lock(settings):
        running = current()
        if is_healthy(running):
            progress(f"devcluster already running and healthy in {running.state_dir}; reusing it")
            if reconcile_nodes_when_reused and node_options is not None:
                nodes.reconcile(admin_api_client(running), node_options.specs())
            return running, False
        started = time.monotonic()
        builder.build()
        _stop_all(running)
        (settings.state_dir / STARTED_BY_PYTEST_FLAG).unlink(missing_ok=True)
        _ensure_ports_free(settings)
        if fresh:
            discard_cluster_data(settings)
        try:
            _start_cluster(settings, node_options or NodeOptions.from_env())
        except BaseException:
            progress(f"startup failed; stopping what was started (logs in {settings.log_dir})")
            _stop_all(settings)
            raise
        progress(f"devcluster up in {time.monotonic() - started:.1f}s")
        return settings, True


def discard_cluster_data(settings: Settings) -> None:
    """Delete the stopped cluster's objects (etcd), metrics history (Prometheus) and pod logs.

    Pods and namespaces an earlier run left behind would otherwise hold GPUs again, and the
    series Prometheus scraped last time would stay visible for its 5-minute lookback beside the
    new ones. The CA, credentials and binaries are kept, so minted kubeconfigs stay valid."""
    for directory in (settings.etcd_data_dir, settings.prometheus_data_dir, settings.pod_logs_dir):
        if directory.exists():
            shutil.rmtree(directory)
            progress(f"discarded {directory}")


def _start_cluster(settings: Settings, node_options: NodeOptions) -> None:
    """Start every component in dependency order and create the simulated nodes."""
    for directory in (settings.run_dir, settings.log_dir, settings.kubeconfig_dir):
        directory.mkdir(parents=True, exist_ok=True)
    _prepare_credentials(settings)
    if settings.kueue:
        kueue.prepare(settings)
    _write_prometheus_config(settings)
    _write_pod_logs_config(settings)
    settings.record()
    _start_and_wait(settings, [COMPONENTS_BY_NAME["etcd"]])
    _start_and_wait(settings, [COMPONENTS_BY_NAME["kube-apiserver"]])
    api = admin_api_client(settings)
    _bootstrap_rbac(api)
    _install_logs_crd(api)
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
    progress(
        f"creating nodes: {node_options.gpu_nodes} GPU ({node_options.gpu_model}), "
        f"{node_options.second_gpu_nodes} GPU ({node_options.second_gpu_model}), "
        f"{node_options.cpu_nodes} CPU-only"
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


def _stop_all(settings: Settings) -> list[str]:
    stopped = []
    for component in reversed(COMPONENTS):
        if processes.stop(settings.run_dir, component.name, component.marker):
            stopped.append(component.name)
    return stopped


def down(purge: bool = False) -> list[str]:
    """Stop every component and verify none is left; optionally delete the state directory."""
    settings = current()
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
