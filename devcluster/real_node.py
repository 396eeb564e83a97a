"""The real node: one node of the devcluster that runs real containers, beside the kwok nodes.

The kubelet and kube-proxy of the same Kubernetes as the control plane, containerd 2 built from
its module (the kubelet of v1.36 needs 2.x; Debian bookworm has 1.6) with Debian's runc, pods on
a bridge of their own (Debian's CNI plugins: bridge, host-local, portmap, loopback), and
kube-proxy's iptables rules, so that Services reach the pods from pods and from the host. The
node is labelled ``gpuportal.io/real-node=true`` and tainted ``gpuportal.io/real-node=true:
NoSchedule``: only what tolerates the taint lands there, and the kwok nodes stay as they are.

What these machines need, found by trying:

* cgroup v1 (hybrid): the kubelet's ``failCgroupV1`` off, the cgroupfs driver;
* no ``CAP_SYS_RESOURCE``: containerd may not give a container an ``oom_score_adj`` below its own
  (``restrict_oom_score_adj``; the pause container asks for -998), and podman's rlimits are
  emptied for the image loads (``devcluster.images``);
* a node IP may not be loopback: the host's address on its default route, where the kubelet
  listens for the apiserver (logs, exec), which shows it a client certificate;
* no image can be pulled: the pause image is built from Kubernetes' own ``pause.c`` and every
  image a test runs is loaded from podman's store (``load_image``), pods use
  ``imagePullPolicy: Never`` or ``IfNotPresent``.

One real node per machine (kube-proxy owns the host's iptables chains): instance 1 only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import yaml

from devcluster import builder, images, processes
from devcluster.components import Component, _http_ok, host_address
from devcluster.log import progress
from devcluster.settings import Settings

REAL_NODE_NAME = "real-node-0"
LABEL = "gpuportal.io/real-node"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
TOLERATION = {"key": LABEL, "operator": "Exists", "effect": "NoSchedule"}
POD_SUBNET = "10.245.0.0/24"  # beside kwok's 10.244.0.0/16 for the simulated pods
BRIDGE = "gpuportal0"
KUBELET_PORT = 26250
KUBELET_HEALTHZ_PORT = 26248
PROXY_HEALTHZ_PORT = 26256
PROXY_METRICS_PORT = 26249
CNI_PLUGINS = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")


class RealNodeUnavailable(RuntimeError):
    """The machine lacks what the real node needs; the message says what."""


def directory(settings: Settings) -> Path:
    return settings.state_dir / "real-node"


def socket_path(settings: Settings) -> Path:
    return directory(settings) / "containerd" / "containerd.sock"


def node_ip() -> str:
    """The host's address on its default route (a node's IP may not be loopback)."""
    address = host_address()
    if address is None:
        raise RealNodeUnavailable("the real node needs a default route (its IP is the host's)")
    return address


def missing() -> list[str]:
    """What the machine lacks for the real node, in words; empty when nothing."""
    lacking = [
        f"{path} (Debian's {package})"
        for path, package in (
            (RUNC, "runc"),
            (CNI_PLUGINS / "bridge", "containernetworking-plugins"),
        )
        if not path.exists()
    ]
    lacking += [f"{tool} (scripts/bootstrap.sh --for-tests)" for tool in images.missing_tools()]
    # iptables for kube-proxy; gcc for the pause image (devcluster.images.pause_image).
    lacking += [tool for tool in ("iptables", "gcc") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        lacking.append("root (the kubelet and containerd run as root)")
    return lacking


# --- configuration ------------------------------------------------------------------------------


def containerd_config(settings: Settings) -> str:
    base = directory(settings) / "containerd"
    return f"""version = 3
root = "{base / "root"}"
state = "{base / "state"}"

[grpc]
  address = "{socket_path(settings)}"

[plugins."io.containerd.cri.v1.runtime"]
  # No CAP_SYS_RESOURCE here: never below containerd's own oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{CNI_PLUGINS}"]
    conf_dir = "{directory(settings) / "cni"}"

[plugins."io.containerd.cri.v1.images"]
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{images.PAUSE_IMAGE}"
"""


def cni_config(settings: Settings) -> dict:
    return {
        "cniVersion": "1.0.0",
        "name": "devcluster",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(directory(settings) / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
            {"type": "loopback"},
        ],
    }


def kubelet_config(settings: Settings) -> dict:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # These machines have cgroup v1 (hybrid), which v1.35 refuses unless told.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{socket_path(settings)}",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(settings.pki_dir / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "address": node_ip(),
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "failSwapOn": False,
        "resolvConf": "/etc/resolv.conf",
        # A shared machine's disk is not this node's to keep free.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "registerWithTaints": [TAINT],
        "serializeImagePulls": False,
    }


def proxy_config(settings: Settings) -> dict:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(settings.kubeconfig_dir / "kube-proxy.kubeconfig")},
        "hostnameOverride": REAL_NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": f"127.0.0.1:{PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{PROXY_METRICS_PORT}",
        "nodePortAddresses": ["primary"],
        # Leave the host's conntrack table size alone (a sysctl it may not write).
        "conntrack": {"maxPerCore": 0},
    }


def write_configs(settings: Settings) -> None:
    base = directory(settings)
    for sub in ("containerd", "cni", "kubelet", "ipam"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "containerd" / "config.toml").write_text(containerd_config(settings))
    (base / "cni" / "10-devcluster.conflist").write_text(json.dumps(cni_config(settings)))
    (base / "kubelet" / "config.yaml").write_text(yaml.safe_dump(kubelet_config(settings)))
    (base / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy_config(settings)))


# --- the processes ------------------------------------------------------------------------------


def _containerd_command(s: Settings) -> list[str]:
    return [
        str(builder.binary("containerd")),
        "--config",
        str(directory(s) / "containerd" / "config.toml"),
    ]


def _containerd_env(s: Settings) -> dict[str, str]:
    # containerd finds its runc shim on PATH.
    return {**os.environ, "PATH": f"{builder.bin_dir()}:{os.environ.get('PATH', '')}"}


def _containerd_healthy(s: Settings) -> bool:
    return ctr(s, "version", check=False).returncode == 0


def _kubelet_command(s: Settings) -> list[str]:
    base = directory(s)
    return [
        str(builder.binary("kubelet")),
        f"--config={base / 'kubelet' / 'config.yaml'}",
        f"--kubeconfig={s.kubeconfig_dir / 'kubelet.kubeconfig'}",
        f"--root-dir={base / 'kubelet' / 'root'}",
        f"--cert-dir={base / 'kubelet' / 'pki'}",
        f"--hostname-override={REAL_NODE_NAME}",
        f"--node-ip={node_ip()}",
        f"--node-labels={LABEL}=true",
    ]


def _proxy_command(s: Settings) -> list[str]:
    return [str(builder.binary("kube-proxy")), f"--config={directory(s) / 'kube-proxy.yaml'}"]


COMPONENTS = (
    Component(
        "containerd",
        "containerd --config",
        _containerd_command,
        _containerd_healthy,
        env=_containerd_env,
    ),
    Component(
        "kubelet",
        f"--hostname-override={REAL_NODE_NAME}",
        _kubelet_command,
        lambda s: _http_ok(f"http://127.0.0.1:{KUBELET_HEALTHZ_PORT}/healthz"),
        startup_timeout=90,
    ),
    Component(
        "kube-proxy",
        "kube-proxy --config",
        _proxy_command,
        lambda s: _http_ok(f"http://127.0.0.1:{PROXY_HEALTHZ_PORT}/healthz"),
    ),
)


def running(settings: Settings) -> bool:
    return all(
        processes.running_pid(settings.run_dir, c.name, c.marker) is not None
        and c.healthy(settings)
        for c in COMPONENTS
    )


def ctr(settings: Settings, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``ctr`` on the node's containerd, in the namespace the kubelet uses."""
    return subprocess.run(
        [
            str(builder.binary("ctr")),
            "--address",
            str(socket_path(settings)),
            "-n",
            "k8s.io",
            *args,
        ],
        capture_output=True,
        text=True,
        check=check,
        timeout=300,
    )


def load_image(settings: Settings, name: str) -> None:
    """Copy an image from podman's store (what buildah built) into the node's containerd."""
    identity = images.image_id(name)
    with tempfile.TemporaryDirectory(prefix="devcluster-image-") as work:
        archive = Path(work) / "image.tar"
        images.run("podman", "save", "--format", "oci-archive", "-o", str(archive), name)
        ctr(settings, "images", "import", "--base-name", name.rsplit(":", 1)[0], str(archive))
    _record_loaded(settings, name, identity)
    progress(f"real node: loaded {name}")


def _loaded_record(settings: Settings) -> Path:
    return directory(settings) / "loaded-images.json"


def _loaded(settings: Settings) -> dict[str, str]:
    """Which of podman's images (by id) each name was loaded from; kept beside containerd's
    store, which goes with it."""
    try:
        return json.loads(_loaded_record(settings).read_text())
    except (OSError, ValueError):
        return {}


def _record_loaded(settings: Settings, name: str, identity: str) -> None:
    record = _loaded_record(settings)
    partial = record.with_name(f"{record.name}.{os.getpid()}")
    partial.write_text(json.dumps({**_loaded(settings), name: identity}, indent=2))
    partial.replace(record)


def ensure_image(settings: Settings, name: str) -> None:
    """``load_image`` unless the node holds that name already, loaded from the same image of
    podman's (a rebuilt image is loaded again): a load takes seconds, the check none."""
    held = ctr(settings, "images", "ls", "-q").stdout.split()
    if _loaded(settings).get(name) == images.image_id(name) and name in held:
        return
    load_image(settings, name)


def start(settings: Settings, start_and_wait) -> None:
    """Start the real node's processes (``start_and_wait``: the cluster's own, which starts and
    waits for components) and load the pause image; a node already running is left as it is."""
    if settings.instance != 1:
        raise RealNodeUnavailable(
            "the real node runs on instance 1 only (kube-proxy owns iptables)"
        )
    lacking = missing()
    if lacking:
        raise RealNodeUnavailable("the real node needs: " + ", ".join(lacking))
    if running(settings):
        return
    stop(settings)
    write_configs(settings)
    start_and_wait(settings, [COMPONENTS[0]])
    load_image(settings, images.pause_image())
    start_and_wait(settings, list(COMPONENTS[1:]))


def stop(settings: Settings) -> list[str]:
    """Stop the node's processes and what they leave: its containers (their shims outlive
    containerd), kube-proxy's iptables rules, the mounts under the kubelet's directory."""
    stopped = []
    for component in reversed(COMPONENTS[1:]):
        if processes.stop(settings.run_dir, component.name, component.marker):
            stopped.append(component.name)
    containerd = COMPONENTS[0]
    if processes.running_pid(settings.run_dir, containerd.name, containerd.marker) is not None:
        _remove_containers(settings)
    if processes.stop(settings.run_dir, containerd.name, containerd.marker):
        stopped.append(containerd.name)
    _kill_leftover_shims(settings)
    if stopped and builder.binary("kube-proxy").exists():
        subprocess.run(
            [str(builder.binary("kube-proxy")), "--cleanup"], capture_output=True, check=False
        )
    _unmount_under(directory(settings))
    return stopped


def _remove_containers(settings: Settings) -> None:
    listed = ctr(settings, "tasks", "ls", "-q", check=False).stdout.split()
    for task in listed:
        ctr(settings, "tasks", "kill", "-s", "SIGKILL", task, check=False)
    for task in listed:
        ctr(settings, "tasks", "delete", "-f", task, check=False)
    for container in ctr(settings, "containers", "ls", "-q", check=False).stdout.split():
        ctr(settings, "containers", "delete", container, check=False)


def _kill_leftover_shims(settings: Settings) -> None:
    address = str(socket_path(settings))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if (
                command
                and command[0].endswith(b"containerd-shim-runc-v2")
                and address.encode() in command
            ):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)


def _unmount_under(path: Path) -> None:
    prefix = str(path.resolve()) + "/"
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
