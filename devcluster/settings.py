"""Where the devcluster keeps its state and which private ports it listens on.

Every value has an environment override so that two developers (or a developer and CI) on one
machine can run separate clusters. The defaults sit in 2xxxx, away from the standard Kubernetes,
etcd, Prometheus and DCGM exporter ports and below the Linux ephemeral port range.

Several clusters run side by side as numbered instances (``DEVCLUSTER_INSTANCE``, default 1):
instance N uses every port of instance 1 plus ``INSTANCE_PORT_STEP * (N - 1)`` and the state
directory of instance 1 with ``-N`` appended (``/tmp/gpuportal-devcluster-2``). The environment's
port and state overrides describe instance 1, so the other instances move with them and never
collide. Instance 1 is exactly the cluster of before.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

DEFAULT_STATE_DIR = Path("/tmp/gpuportal-devcluster")
# Instance N listens on instance 1's ports plus (N - 1) * INSTANCE_PORT_STEP. No two default
# ports differ by a multiple of it up to MAX_INSTANCE (tests/unit/devcluster checks), so no port
# of one instance is a port of another.
INSTANCE_PORT_STEP = 100
MAX_INSTANCE = 9

# field name -> (environment variable, default)
_PORT_DEFAULTS = {
    "etcd_port": ("DEVCLUSTER_ETCD_PORT", 23790),
    "etcd_peer_port": ("DEVCLUSTER_ETCD_PEER_PORT", 23800),
    "apiserver_port": ("DEVCLUSTER_APISERVER_PORT", 26443),
    "controller_manager_port": ("DEVCLUSTER_CONTROLLER_MANAGER_PORT", 26257),
    "scheduler_port": ("DEVCLUSTER_SCHEDULER_PORT", 26259),
    "kwok_port": ("DEVCLUSTER_KWOK_PORT", 26080),
    "prometheus_port": ("DEVCLUSTER_PROMETHEUS_PORT", 29090),
    "dcgm_port": ("DEVCLUSTER_DCGM_PORT", 29400),
    "kueue_webhook_port": ("DEVCLUSTER_KUEUE_WEBHOOK_PORT", 29443),
    "kueue_metrics_port": ("DEVCLUSTER_KUEUE_METRICS_PORT", 28443),
    "kueue_health_port": ("DEVCLUSTER_KUEUE_HEALTH_PORT", 28081),
    "kueue_visibility_port": ("DEVCLUSTER_KUEUE_VISIBILITY_PORT", 28082),
}


@dataclass(frozen=True)
class Settings:
    """Ports and directories of one devcluster."""

    state_dir: Path
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    controller_manager_port: int
    scheduler_port: int
    kwok_port: int
    prometheus_port: int
    dcgm_port: int
    kueue_webhook_port: int
    kueue_metrics_port: int
    kueue_health_port: int
    kueue_visibility_port: int
    scrape_interval_seconds: int = 5
    kueue: bool = True  # whether `up` starts Kueue (DEVCLUSTER_KUEUE=0 leaves it out)
    # whether `up` installs the Gateway API's CRDs (DEVCLUSTER_GATEWAY_API=0 leaves them out)
    gateway_api: bool = True
    # which of the clusters side by side this is (DEVCLUSTER_INSTANCE); see the module's doc
    instance: int = 1

    @classmethod
    def from_env(cls, instance: int | None = None) -> Settings:
        """Read the settings from DEVCLUSTER_* environment variables, falling back to defaults;
        those of ``instance`` (default DEVCLUSTER_INSTANCE, else 1) derived from them."""
        if instance is None:
            instance = instance_from_env()
        check_instance(instance)
        offset = INSTANCE_PORT_STEP * (instance - 1)
        ports = {
            name: int(os.environ.get(var, default)) + offset
            for name, (var, default) in _PORT_DEFAULTS.items()
        }
        return cls(
            state_dir=instance_state_dir(
                Path(os.environ.get("DEVCLUSTER_STATE", DEFAULT_STATE_DIR)), instance
            ),
            instance=instance,
            scrape_interval_seconds=int(os.environ.get("DEVCLUSTER_SCRAPE_INTERVAL", 5)),
            kueue=_flag(os.environ.get("DEVCLUSTER_KUEUE", "1")),
            gateway_api=_flag(os.environ.get("DEVCLUSTER_GATEWAY_API", "1")),
            **ports,
        )

    @property
    def apiserver_url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    @property
    def dcgm_url(self) -> str:
        return f"http://127.0.0.1:{self.dcgm_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state_dir / "admin.kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def kubeconfig_dir(self) -> Path:
        return self.state_dir / "kubeconfigs"

    @property
    def users_dir(self) -> Path:
        return self.state_dir / "users"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def etcd_data_dir(self) -> Path:
        return self.state_dir / "etcd"

    @property
    def kueue_dir(self) -> Path:
        """Kueue's working directory: its configuration and serving certificate (certs/)."""
        return self.state_dir / "kueue"

    @property
    def kueue_webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.kueue_webhook_port}"

    @property
    def kwok_home(self) -> Path:
        return self.state_dir / "kwok-home"

    @property
    def pod_logs_dir(self) -> Path:
        """Simulated containers' log files, which kwok serves (see devcluster.podlogs)."""
        return self.state_dir / "pod-logs"

    @property
    def prometheus_data_dir(self) -> Path:
        return self.state_dir / "prometheus" / "data"

    @property
    def recorded_settings_file(self) -> Path:
        return self.state_dir / "settings.json"

    def ports(self) -> dict[str, int]:
        """Every port by field name."""
        return {name: getattr(self, name) for name in _PORT_DEFAULTS}

    def record(self) -> None:
        """Write the settings a running cluster uses, so `env` and `status` find them later."""
        data = {field.name: str(getattr(self, field.name)) for field in fields(self)}
        self.recorded_settings_file.write_text(json.dumps(data, indent=2) + "\n")


def instance_from_env() -> int:
    """DEVCLUSTER_INSTANCE, or 1."""
    value = os.environ.get("DEVCLUSTER_INSTANCE", "").strip() or "1"
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"DEVCLUSTER_INSTANCE must be a number from 1 to {MAX_INSTANCE}, not {value!r}"
        ) from None


def check_instance(instance: int) -> None:
    if not 1 <= instance <= MAX_INSTANCE:
        raise ValueError(f"devcluster instance must be 1 to {MAX_INSTANCE}, not {instance}")


def instance_state_dir(base: Path, instance: int) -> Path:
    """Instance 1's state directory is ``base``; instance N's is ``base`` with ``-N`` appended."""
    return base if instance == 1 else base.with_name(f"{base.name}-{instance}")


def current(instance: int | None = None) -> Settings:
    """Settings of the cluster in DEVCLUSTER_STATE (of ``instance``, default
    DEVCLUSTER_INSTANCE): the recorded ones if it was started before."""
    from_env = Settings.from_env(instance)
    recorded = from_env.recorded_settings_file
    if not recorded.exists():
        return from_env
    data = json.loads(recorded.read_text())
    values = asdict(from_env)
    for field in fields(Settings):
        if field.name in data and field.name not in ("state_dir", "instance"):
            parse = _flag if field.name in FLAGS else int
            values[field.name] = parse(data[field.name])
    return Settings(**values)


# Settings that are on or off rather than numbers.
FLAGS = ("kueue", "gateway_api")


def _flag(value: str) -> bool:
    """An on/off setting: 0, false, no and off (any case) are off, anything else on."""
    return value.strip().lower() not in ("0", "false", "no", "off")
