"""The DCGM simulator's arithmetic: which pod holds which GPU, and what each GPU reads.

Pure functions only (no Kubernetes, no HTTP), so the rules are unit-tested directly:

* A GPU, once given to a container of a Running pod, stays that container's for as long as the pod
  is Running on the node, whatever other pods come and go (as the kubelet's device assignment
  does). The caller passes the previous assignment of the node to assign_gpus and keeps the one it
  returns for the next call; a holder is known by (namespace, pod, creation time, container), so a
  pod recreated under the same name starts afresh.
* GPUs that are free (never held, or held by a pod that has ended) go to the containers still
  short of GPUs: pods sorted by (creation time, namespace, name), containers in spec order, each
  taking the lowest free index first until it holds as many GPUs as its nvidia.com/gpu limit. So a
  pod created later never displaces an earlier one. Without a previous assignment (the first
  scrape, or after a restart) this hands out every GPU afresh in that order.
* When a node has fewer free GPUs than its pods ask for, the containers first in that order get
  what is free and the rest get none; a container left short takes GPUs as they are freed, before
  any container after it in that order.
* A GPU nobody holds reads 0% utilisation. A held GPU reads the utilisation its pod asks for with
  the annotation devcluster.gpuportal.io/gpu-util ("73", or "90,10" for per-GPU values over the
  pod's GPUs in container spec order, then index order, the last value repeating), else
  DEFAULT_HELD_UTILISATION.
* Every other reading is derived from utilisation, so a test can predict all of them.

Nodes whose GPUs are shared (``devcluster.gpu_sharing``; the simulator reads the configs the
sharing manager applied from the node's applied-config annotations):

* MIG (mixed strategy): one series set per MIG instance, labelled as dcgm-exporter labels it: the
  parent GPU's ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``, plus
  ``GPU_I_PROFILE`` (``1g.10gb``) and ``GPU_I_ID`` (the instance's position in its GPU's layout:
  0, 1, ...; stable for a node, GPU and slot), plus ``container``, ``namespace`` and ``pod`` of the
  container holding it. Pods ask for ``nvidia.com/mig-<profile>``; each profile's instances, in
  (GPU, slot) order, are handed out to them exactly as whole GPUs are (assign_gpus, by
  creation order, stable across scrapes). An instance publishes only
  DCGM_FI_PROF_GR_ENGINE_ACTIVE (its holder's utilisation / 100), DCGM_FI_DEV_FB_USED and
  DCGM_FI_DEV_FB_FREE (over the profile's memory, GB x 1024 MiB): never DCGM_FI_DEV_GPU_UTIL,
  which the real exporter cannot report per MIG instance (NVML's utilisation counters are
  per physical GPU and unavailable with MIG on). Each partitioned GPU also gets one series set
  without instance or pod labels carrying only DCGM_FI_DEV_GPU_TEMP and DCGM_FI_DEV_POWER_USAGE,
  at the load of its instances weighted by their compute slices over 7.
* Time-slicing: pods ask for ``nvidia.com/gpu.shared`` replicas; a node of G GPUs with n replicas
  each has G x n replica indices, handed out as GPUs are (stable across scrapes), replica r being
  on GPU r // n (GPU 0's replicas first). Per physical GPU, each container holding one of its
  replicas gets one series set (the GPU's labels plus its container, namespace and pod) whose
  DCGM_FI_DEV_GPU_UTIL is its own share of the GPU's time: the pod's annotated utilisation
  divided by the number of containers sharing that GPU, floored to hundredths, so that the shares
  of a GPU never sum over 100 (DCGM_FI_PROF_GR_ENGINE_ACTIVE is the same share / 100). Its other
  metrics (memory, temperature, power) are the physical GPU's, at the sum of the shares, and the
  same on each sharer's series. A GPU nobody shares gets one series set without pod labels, at 0.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from devcluster.gpu_models import GpuModel
from devcluster.gpu_sharing import GpuLayout, MigProfile

UTILISATION_ANNOTATION = "devcluster.gpuportal.io/gpu-util"
DEFAULT_HELD_UTILISATION = 100.0
IDLE_TEMPERATURE_CELSIUS = 30
TEMPERATURE_RISE_AT_FULL_LOAD = 50
# Share of the framebuffer a held GPU uses when idle, and the share added at full utilisation.
HELD_MEMORY_BASE_SHARE = 0.10
HELD_MEMORY_LOAD_SHARE = 0.80
_UUID_NAMESPACE = uuid.UUID("6f1d1f3c-3b0e-4f55-9a43-6a7c2d0b9e11")

METRIC_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "Ratio of time the graphics engine is active.",
}


@dataclass(frozen=True)
class ContainerRequest:
    """A container of a pod and how many GPUs its nvidia.com/gpu limit asks for."""

    name: str
    gpus: int


@dataclass(frozen=True)
class PodOnNode:
    """A Running pod bound to a node, reduced to what GPU assignment needs."""

    namespace: str
    name: str
    created: str  # RFC 3339 creation timestamp; sorts chronologically as a string
    containers: tuple[ContainerRequest, ...]
    utilisation: tuple[float, ...] | None = None  # parsed gpu-util annotation


@dataclass(frozen=True)
class GpuHolder:
    """The container holding one GPU, and the utilisation it runs that GPU at."""

    namespace: str
    pod: str
    container: str
    utilisation: float
    created: str = ""  # the pod's creation timestamp, which tells a recreated pod from the last


HolderKey = tuple[str, str, str, str]  # (namespace, pod, created, container)


@dataclass(frozen=True)
class GpuReading:
    """One simulated GPU's identity labels and the values of every published metric."""

    labels: dict[str, str]
    values: dict[str, float]


def gpu_uuid(node: str, index: int) -> str:
    """A UUID that is stable for a (node, GPU index) pair across restarts."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node}/{index}')}"


def parse_utilisation(annotation: str | None) -> tuple[float, ...] | None:
    """Parse the gpu-util annotation: one percentage or a comma-separated list, clamped to
    0..100. Returns None when absent or unparsable (the pod then runs at the default)."""
    if annotation is None or not annotation.strip():
        return None
    try:
        values = tuple(float(part) for part in annotation.split(","))
    except ValueError:
        return None
    return tuple(min(100.0, max(0.0, value)) for value in values)


def _utilisation_for(pod: PodOnNode, position: int) -> float:
    if not pod.utilisation:
        return DEFAULT_HELD_UTILISATION
    return pod.utilisation[min(position, len(pod.utilisation) - 1)]


def _holder_key(holder: GpuHolder) -> HolderKey:
    return (holder.namespace, holder.pod, holder.created, holder.container)


def assign_gpus(
    gpu_count: int,
    pods: Iterable[PodOnNode],
    previous: Mapping[int, GpuHolder] | None = None,
) -> dict[int, GpuHolder]:
    """Hand out a node's GPU indices to its pods; returns index -> holder for held GPUs, by index.

    previous is what the last call for this node returned (None on the first scrape): GPUs it
    gave to containers of pods still present stay theirs, and only the rest are handed out."""
    ordered = sorted(pods, key=lambda p: (p.created, p.namespace, p.name))
    short: dict[HolderKey, int] = defaultdict(int)  # GPUs each container still lacks
    for pod in ordered:
        for container in pod.containers:
            short[(pod.namespace, pod.name, pod.created, container.name)] += container.gpus
    taken: dict[int, HolderKey] = {}
    for index, holder in sorted((previous or {}).items()):
        key = _holder_key(holder)
        if 0 <= index < gpu_count and short.get(key, 0) > 0:
            taken[index] = key
            short[key] -= 1
    free = iter([index for index in range(gpu_count) if index not in taken])
    for key in short:  # in (creation time, namespace, name) order, containers in spec order
        while short[key] > 0 and (index := next(free, None)) is not None:
            taken[index] = key
            short[key] -= 1
    indices: dict[HolderKey, list[int]] = defaultdict(list)
    for index, key in sorted(taken.items()):
        indices[key].append(index)
    holders: dict[int, GpuHolder] = {}
    for pod in ordered:
        position = 0
        for container in pod.containers:
            for index in indices.pop((pod.namespace, pod.name, pod.created, container.name), []):
                holders[index] = GpuHolder(
                    namespace=pod.namespace,
                    pod=pod.name,
                    container=container.name,
                    utilisation=_utilisation_for(pod, position),
                    created=pod.created,
                )
                position += 1
    return dict(sorted(holders.items()))


def readings_for_utilisation(model: GpuModel, utilisation: float, held: bool) -> dict[str, float]:
    """Every metric value of one GPU, derived from its utilisation (0..100)."""
    load = utilisation / 100.0
    memory_used = (
        round(model.memory_mib * (HELD_MEMORY_BASE_SHARE + HELD_MEMORY_LOAD_SHARE * load))
        if held
        else 0
    )
    power = model.idle_power_watts + (model.max_power_watts - model.idle_power_watts) * load
    return {
        "DCGM_FI_DEV_GPU_UTIL": float(round(utilisation)),
        "DCGM_FI_DEV_FB_USED": float(memory_used),
        "DCGM_FI_DEV_FB_FREE": float(model.memory_mib - memory_used),
        "DCGM_FI_DEV_GPU_TEMP": float(
            IDLE_TEMPERATURE_CELSIUS + round(TEMPERATURE_RISE_AT_FULL_LOAD * load)
        ),
        "DCGM_FI_DEV_POWER_USAGE": round(power, 3),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(load, 4),
    }


def gpu_labels(node: str, index: int, model: GpuModel, holder: GpuHolder | None) -> dict[str, str]:
    """The labels dcgm-exporter puts on a GPU's series (pod labels only when it is held)."""
    labels = {
        "gpu": str(index),
        "UUID": gpu_uuid(node, index),
        "pci_bus_id": f"00000000:{0x07 + 0x10 * index:02X}:00.0",
        "device": f"nvidia{index}",
        "modelName": model.model_name,
        "Hostname": node,
    }
    if holder is not None:
        labels.update(container=holder.container, namespace=holder.namespace, pod=holder.pod)
    return labels


def node_readings(
    node: str, model: GpuModel, gpu_count: int, pods: Iterable[PodOnNode]
) -> list[GpuReading]:
    """Readings for every GPU of one node, given the Running pods bound to it and no previous
    assignment (a caller that scrapes again uses assign_gpus and gpu_readings)."""
    return gpu_readings(node, model, gpu_count, assign_gpus(gpu_count, pods))


def gpu_readings(
    node: str, model: GpuModel, gpu_count: int, holders: Mapping[int, GpuHolder]
) -> list[GpuReading]:
    """Readings for every GPU of one node, given who holds which (from assign_gpus)."""
    readings = []
    for index in range(gpu_count):
        holder = holders.get(index)
        utilisation = holder.utilisation if holder else 0.0
        readings.append(
            GpuReading(
                labels=gpu_labels(node, index, model, holder),
                values=readings_for_utilisation(model, utilisation, held=holder is not None),
            )
        )
    return readings


def escape_label_value(value: str) -> str:
    """Escape a label value for the Prometheus text and OpenMetrics formats."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_labels(labels: dict[str, str]) -> str:
    return (
        "{"
        + ",".join(f'{key}="{escape_label_value(value)}"' for key, value in labels.items())
        + "}"
    )


def format_value(value: float) -> str:
    """Integers without a decimal point, other numbers as Python's shortest repr."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render_exposition(readings: Iterable[GpuReading]) -> str:
    """Render readings in the Prometheus text exposition format, one family per metric (a
    reading without a metric, as a MIG instance has no DCGM_FI_DEV_GPU_UTIL, has no sample)."""
    readings = list(readings)
    lines = []
    for metric, help_text in METRIC_HELP.items():
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} gauge")
        for reading in readings:
            if metric not in reading.values:
                continue
            lines.append(
                f"{metric}{format_labels(reading.labels)} {format_value(reading.values[metric])}"
            )
    return "\n".join(lines) + "\n"


# --- MIG instances ---------------------------------------------------------------------------

MIG_COMPUTE_SLICES = 7


@dataclass(frozen=True)
class MigInstance:
    """One MIG instance of a node: its GPU, its id on that GPU (GPU_I_ID) and its profile."""

    gpu: int
    instance_id: int
    profile: MigProfile


def mig_instances(
    layouts: Iterable[GpuLayout], profiles: Mapping[str, MigProfile]
) -> list[MigInstance]:
    """A node's MIG instances in (GPU, slot) order; GPU_I_ID is the slot."""
    return [
        MigInstance(gpu, slot, profiles[name])
        for gpu, layout in enumerate(layouts)
        for slot, name in enumerate(layout or ())
    ]


def assign_mig_instances(
    instances: list[MigInstance],
    pods_by_profile: Mapping[str, Iterable[PodOnNode]],
    previous: Mapping[str, Mapping[int, GpuHolder]] | None = None,
) -> dict[str, dict[int, GpuHolder]]:
    """Hand out each profile's instances as assign_gpus hands out GPUs: profile -> index among
    that profile's instances (in (GPU, slot) order) -> holder. A pod's ContainerRequest.gpus is
    its request of that profile's resource."""
    holders = {}
    for name in sorted({instance.profile.name for instance in instances}):
        count = sum(1 for instance in instances if instance.profile.name == name)
        holders[name] = assign_gpus(
            count, pods_by_profile.get(name, ()), (previous or {}).get(name)
        )
    return holders


def _memory_used(memory_mib: int, utilisation: float, held: bool) -> int:
    load = utilisation / 100.0
    if not held:
        return 0
    return round(memory_mib * (HELD_MEMORY_BASE_SHARE + HELD_MEMORY_LOAD_SHARE * load))


def mig_readings(
    node: str,
    model: GpuModel,
    instances: list[MigInstance],
    holders: Mapping[str, Mapping[int, GpuHolder]],
) -> list[GpuReading]:
    """For each partitioned GPU: its physical series (temperature, power), then one series set
    per instance (engine activity and memory), with its holder's pod labels when held."""
    readings: list[GpuReading] = []
    positions: dict[str, int] = defaultdict(int)
    by_gpu: dict[int, list[tuple[MigInstance, GpuHolder | None]]] = defaultdict(list)
    for instance in instances:
        name = instance.profile.name
        by_gpu[instance.gpu].append((instance, holders.get(name, {}).get(positions[name])))
        positions[name] += 1
    for gpu, members in sorted(by_gpu.items()):
        slices = sum(i.profile.compute_slices * (h.utilisation if h else 0.0) for i, h in members)
        physical = readings_for_utilisation(model, slices / MIG_COMPUTE_SLICES, held=True)
        readings.append(
            GpuReading(
                labels=gpu_labels(node, gpu, model, None),
                values={
                    metric: physical[metric]
                    for metric in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE")
                },
            )
        )
        for instance, holder in members:
            labels = gpu_labels(node, gpu, model, None)
            labels.update(GPU_I_PROFILE=instance.profile.name, GPU_I_ID=str(instance.instance_id))
            if holder is not None:
                labels.update(
                    container=holder.container, namespace=holder.namespace, pod=holder.pod
                )
            utilisation = holder.utilisation if holder else 0.0
            used = _memory_used(instance.profile.memory_mib, utilisation, holder is not None)
            readings.append(
                GpuReading(
                    labels=labels,
                    values={
                        "DCGM_FI_DEV_FB_USED": float(used),
                        "DCGM_FI_DEV_FB_FREE": float(instance.profile.memory_mib - used),
                        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(utilisation / 100.0, 4),
                    },
                )
            )
    return readings


# --- time-sliced GPUs ------------------------------------------------------------------------


def gpu_sharers(
    gpu_count: int, replicas: int, holders: Mapping[int, GpuHolder]
) -> dict[int, list[GpuHolder]]:
    """GPU -> the containers holding its replicas (each once, in replica order), from the
    holders of replica indices (assign_gpus over gpu_count x replicas)."""
    sharers: dict[int, list[GpuHolder]] = {}
    for gpu in range(gpu_count):
        seen: dict[HolderKey, GpuHolder] = {}
        for replica in range(gpu * replicas, (gpu + 1) * replicas):
            holder = holders.get(replica)
            if holder is not None:
                seen.setdefault(_holder_key(holder), holder)
        sharers[gpu] = list(seen.values())
    return sharers


def share_of(utilisation: float, sharers: int) -> float:
    """A sharer's part of its GPU's time, in percent, floored to hundredths (shares of one GPU
    never sum over 100)."""
    return math.floor(utilisation * 100 / sharers) / 100


def shared_gpu_readings(
    node: str, model: GpuModel, gpu_count: int, replicas: int, holders: Mapping[int, GpuHolder]
) -> list[GpuReading]:
    """Per physical GPU: one series set per container sharing it, at its share, or one without
    pod labels at 0 when nobody shares it."""
    readings = []
    for gpu, sharers in gpu_sharers(gpu_count, replicas, holders).items():
        if not sharers:
            readings.append(
                GpuReading(
                    gpu_labels(node, gpu, model, None), readings_for_utilisation(model, 0.0, False)
                )
            )
            continue
        shares = [share_of(holder.utilisation, len(sharers)) for holder in sharers]
        physical = readings_for_utilisation(model, min(100.0, sum(shares)), held=True)
        for holder, share in zip(sharers, shares, strict=True):
            values = dict(physical)
            values["DCGM_FI_DEV_GPU_UTIL"] = share
            values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = round(share / 100, 6)
            readings.append(GpuReading(gpu_labels(node, gpu, model, holder), values))
    return readings
