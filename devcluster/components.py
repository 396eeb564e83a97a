"""The devcluster's processes: for each component (etcd, the Kubernetes control plane, kwok, Kueue,
the DCGM simulator, the GPU sharing manager, Prometheus) the command that starts it and the check
that says it is ready.
Starting and stopping them is ``devcluster.cluster``'s job; the files they read are written by
``devcluster.bootstrap``."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devcluster import builder, kueue, nodes
from devcluster.settings import Settings

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
REPO_ROOT = Path(__file__).resolve().parent.parent
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
# Retention long enough that backfilled history (days to months old) is not deleted on load.
PROMETHEUS_RETENTION = "400d"


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


def host_address() -> str | None:
    """The host's address on its default route, None without one: the real node's IP (a
    node's may not be loopback) and the apiserver's advertised one, which the `kubernetes`
    Service leads pods to."""
    route = subprocess.run(
        ["ip", "-4", "route", "get", "192.0.2.1"], capture_output=True, text=True, check=False
    ).stdout.split()
    return route[route.index("src") + 1] if "src" in route else None


def _advertised_flags() -> list[str]:
    """Listen on every address and advertise the host's, so that the real node's pods reach
    the apiserver through the `kubernetes` Service (clients still need the cluster's
    certificates or a token). Without a default route, loopback only, and the Service gets
    no endpoints (a loopback address is not a valid one)."""
    address = host_address()
    if address is None:
        return [
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
        ]
    return [
        "--bind-address=0.0.0.0",
        f"--advertise-address={address}",
        "--endpoint-reconciler-type=lease",
    ]


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
        *_advertised_flags(),
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
        "--allow-privileged=true",
        # kwok gives each node a Hostname address too, which nothing resolves.
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={pki_dir / 'clients' / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki_dir / 'clients' / 'apiserver-kubelet-client.key'}",
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
        f"--config={kwok_logs_config(s)}",
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


def kwok_logs_config(s: Settings) -> Path:
    return s.state_dir / "kwok-logs.yaml"


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


def _sharing_manager_command(s: Settings) -> list[str]:
    return [
        sys.executable,
        "-m",
        "devcluster.sharing_manager",
        f"--kubeconfig={_kubeconfig_path(s, 'sharing-manager')}",
        f"--heartbeat={sharing_manager_heartbeat(s)}",
    ]


def sharing_manager_heartbeat(s: Settings) -> Path:
    """The file the sharing manager touches after every pass that reached the apiserver."""
    return s.run_dir / "sharing-manager.heartbeat"


# The sharing manager is healthy when its last good pass (every 0.5 s) is this recent.
SHARING_MANAGER_HEARTBEAT_SECONDS = 10.0


def _sharing_manager_healthy(s: Settings) -> bool:
    """A pass of this very process (not a predecessor's) reached the apiserver lately."""
    try:
        beat = sharing_manager_heartbeat(s).stat().st_mtime
        started = (s.run_dir / "sharing-manager.pid").stat().st_mtime
    except OSError:
        return False
    return beat >= started and time.time() - beat < SHARING_MANAGER_HEARTBEAT_SECONDS


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
        "sharing-manager",
        "devcluster.sharing_manager",
        _sharing_manager_command,
        _sharing_manager_healthy,
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
