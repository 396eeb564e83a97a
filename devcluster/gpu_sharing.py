"""GPU sharing as NVIDIA's GPU Operator sets it up: MIG profiles and time-slicing, in pure terms.

What a node advertises and how it is labelled follows from three things: its GPU model (the
``nvidia.com/gpu.product`` label without the ``-SHARED`` suffix), its number of GPUs
(``nvidia.com/gpu.count``) and the two configs the operator applies:

* the MIG manager's ``nvidia.com/mig.config`` (mixed strategy): ``all-disabled`` (whole GPUs),
  ``all-<profile>`` (every GPU cut into as many instances of that profile as fit, e.g.
  ``all-1g.10gb`` = 7 per A100-80GB), ``all-balanced`` (per GPU 2 of the smallest profile, 1 of
  the two-slice one and 1 of the three-slice one, as the operator's default ConfigMap has it)
  and ``devcluster-3g.40gbx2-1g.10gb`` (per GPU 2 x 3g.40gb + 1 x 1g.10gb: the example issue 31
  names; real A100-80GB hardware cannot fit it, its memory slices run out after the two 3g.40gb,
  and this simulation does not check fit). Each profile is advertised as its own resource
  (``nvidia.com/mig-1g.10gb``) and counted in a ``nvidia.com/mig-1g.10gb.count`` label;
  ``nvidia.com/gpu`` counts the GPUs with MIG disabled ("0" when every GPU is partitioned, as a
  kubelet shows a device plugin's resource with no devices). An unknown config, or MIG on a model
  without MIG (L40S, L4, T4), is refused: ``UnknownConfig``.
* the device plugin's ``nvidia.com/device-plugin.config``: ``time-slicing-<n>`` advertises each
  whole GPU as n replicas of ``nvidia.com/gpu.shared`` (renameByDefault, so no ``nvidia.com/gpu``)
  and labels the node ``nvidia.com/gpu.replicas=<n>``,
  ``nvidia.com/gpu.sharing-strategy=time-slicing`` and ``nvidia.com/gpu.product=<model>-SHARED``;
  no config (absent or empty) is no sharing: replicas 1, strategy none. Time-slicing applies to
  the GPUs MIG leaves whole (MIG instances are never replicated here).

The label names are the product's (``clusters/vocabulary.py``), copied because the devcluster
imports no product app package that sets up the Kubernetes client; a unit test keeps them equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --- the GPU Operator's names (copied from clusters/vocabulary.py) -------------------------------
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_DISABLED = "all-disabled"
MIG_STATE_SUCCESS = "success"
MIG_STATE_FAILED = "failed"
MIG_STATE_PENDING = "pending"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
SHARED_PRODUCT_SUFFIX = "-SHARED"
TIME_SLICING_CONFIG_PREFIX = "time-slicing-"
PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"

# --- the devcluster's own annotations (the sharing manager's contract) ---------------------------
PREFIX = "devcluster.gpuportal.io"
MIG_APPLIED_ANNOTATION = f"{PREFIX}/mig-config-applied"
DEVICE_PLUGIN_APPLIED_ANNOTATION = f"{PREFIX}/device-plugin-config-applied"
DELAY_ANNOTATION = f"{PREFIX}/sharing-delay-seconds"
FAIL_ANNOTATION = f"{PREFIX}/sharing-fail"
ERROR_ANNOTATION = f"{PREFIX}/sharing-error"
FAILED_REQUEST_ANNOTATION = f"{PREFIX}/sharing-failed-request"
DEFAULT_DELAY_SECONDS = 2.0
CUSTOM_MIXED_CONFIG = "devcluster-3g.40gbx2-1g.10gb"


@dataclass(frozen=True)
class MigProfile:
    name: str  # "1g.10gb"
    compute_slices: int  # of 7
    memory_gb: int
    max_per_gpu: int

    @property
    def memory_mib(self) -> int:
        return self.memory_gb * 1024

    @property
    def resource(self) -> str:
        return f"{MIG_RESOURCE_PREFIX}{self.name}"


def _profiles(*rows: tuple[str, int]) -> dict[str, MigProfile]:
    table = {}
    for name, count in rows:
        slices, memory = re.fullmatch(r"(\d)g\.(\d+)gb", name).groups()
        table[name] = MigProfile(name, int(slices), int(memory), count)
    return table


_A100_80GB = _profiles(
    ("1g.10gb", 7), ("2g.20gb", 3), ("3g.40gb", 2), ("4g.40gb", 1), ("7g.80gb", 1)
)
_A100_40GB = _profiles(
    ("1g.5gb", 7), ("2g.10gb", 3), ("3g.20gb", 2), ("4g.20gb", 1), ("7g.40gb", 1)
)
_H100_80GB = _profiles(
    ("1g.10gb", 7), ("1g.20gb", 4), ("2g.20gb", 3), ("3g.40gb", 2), ("4g.40gb", 1), ("7g.80gb", 1)
)
# product label -> the MIG profiles its GPUs offer; models not here have no MIG.
MIG_PROFILES: dict[str, dict[str, MigProfile]] = {
    "NVIDIA-A100-SXM4-80GB": _A100_80GB,
    "NVIDIA-A100-SXM4-40GB": _A100_40GB,
    "NVIDIA-H100-80GB-HBM3": _H100_80GB,
}
# all-balanced per GPU: (smallest profile, 2), (two-slice, 1), (three-slice, 1)
_BALANCED = {
    "NVIDIA-A100-SXM4-80GB": (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
    "NVIDIA-A100-SXM4-40GB": (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
    "NVIDIA-H100-80GB-HBM3": (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
}
_CUSTOM = {CUSTOM_MIXED_CONFIG: (("3g.40gb", 2), ("1g.10gb", 1))}

GpuLayout = tuple[str, ...] | None  # the profiles of one GPU's instances in order; None = whole


class UnknownConfig(ValueError):
    """A config the simulated operator does not know, or cannot apply to this model."""


def base_product(product_label: str) -> str:
    """The model's product label without the suffix a shared node's label carries."""
    return product_label.removesuffix(SHARED_PRODUCT_SUFFIX)


def profiles_for(product_label: str) -> dict[str, MigProfile]:
    return MIG_PROFILES.get(base_product(product_label), {})


def gpu_layout(product_label: str, mig_config: str | None) -> GpuLayout:
    """The instances one GPU is cut into under mig_config (None: MIG disabled)."""
    if not mig_config or mig_config == MIG_CONFIG_DISABLED:
        return None
    product = base_product(product_label)
    profiles = profiles_for(product)
    if not profiles:
        raise UnknownConfig(f"{product} has no MIG (config {mig_config})")
    if mig_config == "all-balanced":
        rows = _BALANCED[product]
    elif mig_config in _CUSTOM:
        rows = _CUSTOM[mig_config]
    elif mig_config.startswith("all-") and mig_config[4:] in profiles:
        profile = profiles[mig_config[4:]]
        rows = ((profile.name, profile.max_per_gpu),)
    else:
        raise UnknownConfig(f"unknown MIG config {mig_config!r} for {product}")
    for name, _ in rows:
        if name not in profiles:
            raise UnknownConfig(f"MIG config {mig_config!r}: {product} has no {name}")
    return tuple(name for name, count in rows for _ in range(count))


def replicas_of(device_plugin_config: str | None) -> int:
    """Replicas per GPU of a device plugin config: 1 without one, n for time-slicing-<n>."""
    if not device_plugin_config:
        return 1
    match = re.fullmatch(
        re.escape(TIME_SLICING_CONFIG_PREFIX) + r"([1-9]\d*)", device_plugin_config
    )
    if not match:
        raise UnknownConfig(f"unknown device plugin config {device_plugin_config!r}")
    return int(match.group(1))


@dataclass(frozen=True)
class NodeShape:
    """The GPU resources and labels a node shows under its configs."""

    resources: dict[str, str]  # GPU resources of allocatable and capacity
    labels: dict[str, str]  # operator-managed labels (product, counts, replicas, strategy)
    layouts: tuple[GpuLayout, ...]  # per physical GPU
    replicas: int


def node_shape(
    product_label: str, gpus: int, mig_config: str | None, device_plugin_config: str | None
) -> NodeShape:
    """What a node of `gpus` GPUs of a model shows once both configs are applied; raises
    UnknownConfig for a config it cannot apply."""
    product = base_product(product_label)
    layout = gpu_layout(product, mig_config)
    replicas = replicas_of(device_plugin_config)
    layouts = tuple(layout for _ in range(gpus))
    whole = sum(1 for item in layouts if item is None)
    resources: dict[str, str] = {}
    counts: dict[str, int] = {}
    for item in layouts:
        for name in item or ():
            counts[name] = counts.get(name, 0) + 1
    if replicas > 1:
        resources[SHARED_GPU_RESOURCE] = str(whole * replicas)
    else:
        resources[GPU_RESOURCE] = str(whole)
    labels = {
        PRODUCT_LABEL: product + (SHARED_PRODUCT_SUFFIX if replicas > 1 else ""),
        GPU_REPLICAS_LABEL: str(replicas),
        GPU_SHARING_STRATEGY_LABEL: "time-slicing" if replicas > 1 else "none",
    }
    for name, count in sorted(counts.items()):
        resources[f"{MIG_RESOURCE_PREFIX}{name}"] = str(count)
        labels[f"{MIG_RESOURCE_PREFIX}{name}.count"] = str(count)
    return NodeShape(resources=resources, labels=labels, layouts=layouts, replicas=replicas)


def is_gpu_resource(name: str) -> bool:
    return name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX)


def is_mig_count_label(name: str) -> bool:
    return name.startswith(MIG_RESOURCE_PREFIX) and name.endswith(".count")


def resource_patch(current: dict[str, str], wanted: dict[str, str]) -> dict[str, str | None]:
    """A merge patch of allocatable (or capacity) that makes its GPU resources `wanted`: every
    GPU resource not wanted any more set to None (deleted), the others left alone."""
    patch: dict[str, str | None] = {
        name: None for name in current if is_gpu_resource(name) and name not in wanted
    }
    patch.update(wanted)
    return patch


def label_patch(current: dict[str, str], wanted: dict[str, str]) -> dict[str, str | None]:
    """A merge patch of the labels: the shape's labels, and MIG count labels no longer wanted
    deleted."""
    patch: dict[str, str | None] = {
        name: None for name in current if is_mig_count_label(name) and name not in wanted
    }
    patch.update(wanted)
    return patch


def shared_gpu_of(replica: int, replicas_per_gpu: int) -> int:
    """The physical GPU a time-slicing replica index is on (GPU 0's replicas first)."""
    return replica // replicas_per_gpu


def sharing_delay(annotations: dict[str, str]) -> float:
    """The node's reconfiguration delay (its delay annotation, else the default)."""
    try:
        return max(0.0, float(annotations.get(DELAY_ANNOTATION, DEFAULT_DELAY_SECONDS)))
    except ValueError:
        return DEFAULT_DELAY_SECONDS
