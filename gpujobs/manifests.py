"""A GPU job as the ``batch/v1`` Job the cluster runs: a pure function of the job's spec and the
cluster's GPU placement rules. No database, no network.

What every Job gets:

* ``resources.limits[<gpu resource>]`` on the GPU container only (the API server defaults the
  request to the limit for extended resources, which is what the team's ResourceQuota counts);
  an optional CPU-only preprocessing container runs beside it (a second container) or before it
  (an init container), and never asks for GPUs;
* a required node affinity term from the cluster's GPU node selector (``hardware-type In [gpu]``
  by default) plus the GPU model label when a model was chosen, and a toleration for the GPU
  taint, so GPU pods land on GPU nodes and nowhere else;
* ``activeDeadlineSeconds`` (the maximum run time), ``backoffLimit`` and
  ``ttlSecondsAfterFinished``; one pod (``completions`` and ``parallelism`` 1), never restarted
  in place;
* the portal's ownership label, the team label and the job-id label on the Job and its pods, so
  the watcher finds both with one label selector;
* the command and arguments as the lists the user gave: nothing is joined into a shell string.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
TEAM_LABEL = "gpuportal.io/team"  # the same key tenants.manifests puts on a team's objects
JOB_ID_LABEL = "gpuportal.io/job-id"
JOB_NAME_ANNOTATION = "gpuportal.io/job-name"
SUBMITTED_BY_ANNOTATION = "gpuportal.io/submitted-by"
JOB_NAME_PREFIX = "gpujob-"
GPU_CONTAINER = "main"
PREPROCESS_CONTAINER = "preprocess"


class PreprocessMode:
    BESIDE = "beside"  # a second container in the same pod, running alongside
    BEFORE = "before"  # an init container that must finish before the GPU container starts


@dataclass(frozen=True)
class Preprocess:
    """A CPU-only container that prepares data for the GPU container."""

    image: str
    mode: str = PreprocessMode.BEFORE
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    cpu_cores: Decimal | None = None
    memory_gib: Decimal | None = None


@dataclass(frozen=True)
class Placement:
    """Where a cluster's GPU pods may go: its GPU node labels and taint, and the portal's name."""

    node_selector: dict[str, str] = field(default_factory=lambda: {"hardware-type": "gpu"})
    gpu_taint_key: str = "nvidia.com/gpu"
    gpu_model_label: str = "nvidia.com/gpu.product"
    portal_name: str = "gpu-portal"


@dataclass(frozen=True)
class JobSpec:
    """What a user asked to run (a ``GpuJob`` row gives exactly these figures)."""

    job_id: int
    namespace: str
    name: str
    image: str
    gpus: int
    max_runtime_seconds: int
    ttl_seconds_after_finished: int
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    gpu_resource: str = "nvidia.com/gpu"
    gpu_model: str = ""
    cpu_cores: Decimal | None = None
    memory_gib: Decimal | None = None
    backoff_limit: int = 0
    preprocess: Preprocess | None = None
    annotations: tuple[tuple[str, str], ...] = ()
    submitted_by: str = ""


def job_name(job_id: int) -> str:
    """The Job's name comes from the portal's id, so creating it twice finds the first one."""
    return f"{JOB_NAME_PREFIX}{job_id}"


def job_id_from_name(name: str) -> int | None:
    """The portal's id in a Job name (``gpujob-17`` -> 17), or None for anyone else's Job."""
    if not name.startswith(JOB_NAME_PREFIX):
        return None
    rest = name[len(JOB_NAME_PREFIX) :]
    return int(rest) if rest.isdigit() and not rest.startswith("0") else None


def labels(spec: JobSpec, placement: Placement) -> dict[str, str]:
    return {
        MANAGED_BY_LABEL: placement.portal_name,
        TEAM_LABEL: spec.namespace,
        JOB_ID_LABEL: str(spec.job_id),
    }


def ownership_selector(portal_name: str) -> str:
    """The label selector that finds every Job and pod the portal made, in every namespace."""
    return f"{MANAGED_BY_LABEL}={portal_name},{JOB_ID_LABEL}"


def cpu_quantity(cores: Decimal) -> str:
    """Cores as a Kubernetes quantity in millicores: Decimal("1.5") -> "1500m"."""
    return f"{int(Decimal(cores) * 1000)}m"


def memory_quantity(gib: Decimal) -> str:
    """GiB as a Kubernetes quantity in MiB: Decimal("0.5") -> "512Mi"."""
    return f"{int(Decimal(gib) * 1024)}Mi"


def _cpu_memory(cpu_cores: Decimal | None, memory_gib: Decimal | None) -> dict[str, str]:
    amounts = {}
    if cpu_cores is not None:
        amounts["cpu"] = cpu_quantity(cpu_cores)
    if memory_gib is not None:
        amounts["memory"] = memory_quantity(memory_gib)
    return amounts


def _resources(limits: dict[str, str], requests: dict[str, str]) -> dict:
    resources = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    return resources


def _env(pairs: tuple[tuple[str, str], ...]) -> list[dict]:
    return [{"name": name, "value": value} for name, value in pairs]


def gpu_container(spec: JobSpec) -> dict:
    cpu_memory = _cpu_memory(spec.cpu_cores, spec.memory_gib)
    container = {
        "name": GPU_CONTAINER,
        "image": spec.image,
        # CPU and memory are asked for as much as they are limited to: a GPU job that is
        # throttled or evicted wastes the GPUs it holds.
        "resources": _resources({spec.gpu_resource: str(spec.gpus), **cpu_memory}, cpu_memory),
    }
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.env:
        container["env"] = _env(spec.env)
    return container


def preprocess_container(spec: JobSpec) -> dict:
    pre = spec.preprocess
    assert pre is not None
    cpu_memory = _cpu_memory(pre.cpu_cores, pre.memory_gib)
    # Images built on CUDA set NVIDIA_VISIBLE_DEVICES=all, and on a GPU node the NVIDIA runtime
    # would then hand every GPU of the node to a container that asked for none: "void" stops it.
    env = [e for e in _env(spec.env) if e["name"] != "NVIDIA_VISIBLE_DEVICES"]
    env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    container = {"name": PREPROCESS_CONTAINER, "image": pre.image, "env": env}
    if pre.command:
        container["command"] = list(pre.command)
    if pre.args:
        container["args"] = list(pre.args)
    resources = _resources(dict(cpu_memory), dict(cpu_memory))
    if resources:
        container["resources"] = resources
    return container


def node_affinity(spec: JobSpec, placement: Placement) -> dict:
    """One required term: every GPU node label (``In [value]``), and the model when chosen."""
    expressions = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in sorted(placement.node_selector.items())
    ]
    if spec.gpu_model:
        expressions.append(
            {"key": placement.gpu_model_label, "operator": "In", "values": [spec.gpu_model]}
        )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]
            }
        }
    }


def gpu_toleration(placement: Placement) -> dict:
    """Tolerate the GPU taint whatever its value (device plugins and clouds differ)."""
    return {"key": placement.gpu_taint_key, "operator": "Exists", "effect": "NoSchedule"}


def job_manifest(spec: JobSpec, placement: Placement) -> dict:
    """The ``batch/v1`` Job for the spec, as the plain dict the API takes."""
    job_labels = labels(spec, placement)
    annotations = {JOB_NAME_ANNOTATION: spec.name}
    if spec.submitted_by:
        annotations[SUBMITTED_BY_ANNOTATION] = spec.submitted_by
    pod_spec: dict = {
        "restartPolicy": "Never",
        "affinity": node_affinity(spec, placement),
        "tolerations": [gpu_toleration(placement)],
        "containers": [gpu_container(spec)],
        # Jobs talk to their data, not to the Kubernetes API or the namespace's services.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if spec.preprocess is not None:
        if spec.preprocess.mode == PreprocessMode.BEFORE:
            pod_spec["initContainers"] = [preprocess_container(spec)]
        else:
            pod_spec["containers"].append(preprocess_container(spec))
    template_metadata: dict = {"labels": dict(job_labels)}
    if spec.annotations:
        template_metadata["annotations"] = dict(spec.annotations)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(spec.job_id),
            "namespace": spec.namespace,
            "labels": job_labels,
            "annotations": annotations,
        },
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": spec.backoff_limit,
            "activeDeadlineSeconds": spec.max_runtime_seconds,
            "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
            "template": {"metadata": template_metadata, "spec": pod_spec},
        },
    }
