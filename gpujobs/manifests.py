"""A GPU job as the ``batch/v1`` Job the cluster runs: a pure function of the job's spec and the
cluster's GPU placement rules. No database, no network; ``cluster_placement``,
``stored_job_spec`` and ``stored_job_manifest`` only read those from a cluster's and a job's
rows and the settings.

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
* the command and arguments as the lists the user gave: nothing is joined into a shell string;
* the safe part of the restricted Pod Security Standard on every pod and container (the
  runtime's default seccomp profile, no privilege escalation, every capability dropped), and
  ``runAsNonRoot`` where the cluster enforces restricted (there the image must name a non-root
  user), so the portal's pods pass whatever level the team's namespace enforces.
* on a cluster whose quota Kueue enforces (``JobSpec.queue``): ``spec.suspend: true``, the
  team's LocalQueue (``kueue.x-k8s.io/queue-name``: ``guaranteed`` or ``opportunistic``) and the
  matching WorkloadPriorityClass (``kueue.x-k8s.io/priority-class``) on the Job, so that the Job
  waits in the queue until Kueue admits it (and un-suspends it, adding the flavor's node labels).

``container`` builds any workload's container from a ``specs.ContainerRequest``, and
``cluster_placement``, ``gpu_node_affinity``, ``gpu_toleration`` and ``hide_gpus`` place any
workload's GPU pods (``serving.manifests`` builds inference services' Deployments with them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings

from clusters.vocabulary import (
    DEFAULT_GPU_MODEL_LABEL,
    DEFAULT_GPU_NODE_SELECTOR,
    DEFAULT_GPU_TAINT_KEY,
    DEFAULT_PORTAL_NAME,
    JOB_ID_LABEL,
    JOB_NAME_ANNOTATION,
    KUEUE_PRIORITY_CLASS_LABEL,
    KUEUE_QUEUE_LABEL,
    MANAGED_BY_LABEL,
    NO_GPUS,
    NVIDIA_VISIBLE_DEVICES,
    POD_SECURITY_BASELINE,
    POD_SECURITY_RESTRICTED,
    SUBMITTED_BY_ANNOTATION,
    TEAM_LABEL,
    priority_class_name,
)
from gpujobs.specs import ContainerRequest, EnvPairs, JobRequest, PreprocessMode

if TYPE_CHECKING:
    from clusters.models import Cluster
    from gpujobs.models import GpuJob

JOB_NAME_PREFIX = "gpujob-"
GPU_CONTAINER = "main"
PREPROCESS_CONTAINER = "preprocess"


@dataclass(frozen=True)
class Placement:
    """Where a cluster's GPU pods may go: its GPU node labels and taint, and the portal's name."""

    node_selector: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_GPU_NODE_SELECTOR))
    gpu_taint_key: str = DEFAULT_GPU_TAINT_KEY
    gpu_model_label: str = DEFAULT_GPU_MODEL_LABEL
    portal_name: str = DEFAULT_PORTAL_NAME
    # The Pod Security Standard the cluster's team namespaces enforce.
    pod_security_level: str = POD_SECURITY_BASELINE


@dataclass(frozen=True)
class JobSpec:
    """A job as the builder takes it: what the user asked for (``request``), and what the
    portal adds: the job's id, the team's namespace, how long a finished Job stays, who
    submitted it, and the team's LocalQueue it waits in (``queue``; empty when the cluster
    enforces quota without Kueue)."""

    job_id: int
    namespace: str
    request: JobRequest
    ttl_seconds_after_finished: int
    submitted_by: str = ""
    queue: str = ""


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


def kueue_labels(*, queue: str, priority: str, portal_name: str) -> dict[str, str]:
    """Kueue's labels on queued work (a Job, a Deployment and its pods): the team's LocalQueue
    it waits in and the WorkloadPriorityClass it runs at; none without a queue."""
    if not queue:
        return {}
    return {
        KUEUE_QUEUE_LABEL: queue,
        KUEUE_PRIORITY_CLASS_LABEL: priority_class_name(portal_name, priority),
    }


def queue_labels(spec: JobSpec, placement: Placement) -> dict[str, str]:
    """Kueue's labels on a queued Job: its LocalQueue and its WorkloadPriorityClass."""
    return kueue_labels(
        queue=spec.queue, priority=spec.request.priority, portal_name=placement.portal_name
    )


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


def container_security_context() -> dict:
    """What restricted asks of every container, and the portal's containers never need."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def pod_security_context(placement: Placement) -> dict:
    """The runtime's default seccomp profile always; a non-root user where the cluster
    enforces restricted (the kubelet then refuses an image that would run as root)."""
    context: dict = {"seccompProfile": {"type": "RuntimeDefault"}}
    if placement.pod_security_level == POD_SECURITY_RESTRICTED:
        context["runAsNonRoot"] = True
    return context


def _env(pairs: EnvPairs) -> list[dict]:
    return [{"name": name, "value": value} for name, value in pairs]


def hide_gpus(env: EnvPairs) -> EnvPairs:
    """The environment of a container that asks for no GPUs. Images built on CUDA set
    NVIDIA_VISIBLE_DEVICES=all, and on a GPU node the NVIDIA runtime would then hand every GPU
    of the node to that container: "void" stops it."""
    kept = tuple((name, value) for name, value in env if name != NVIDIA_VISIBLE_DEVICES)
    return (*kept, (NVIDIA_VISIBLE_DEVICES, NO_GPUS))


def container(
    name: str,
    request: ContainerRequest,
    *,
    gpus: dict[str, str] | None = None,
    env: EnvPairs | None = None,
) -> dict:
    """A workload's container: its image, command and arguments as the user's lists, its
    environment (``env`` in place of the request's own when given), and its resources. CPU and
    memory are asked for as much as they are limited to: a GPU workload that is throttled or
    evicted wastes the GPUs it holds. GPUs are limits only (the API server defaults the request
    to the limit for extended resources, which is what the team's ResourceQuota counts)."""
    cpu_memory = _cpu_memory(request.cpu_cores, request.memory_gib)
    manifest: dict = {"name": name, "image": request.image}
    if request.command:
        manifest["command"] = list(request.command)
    if request.args:
        manifest["args"] = list(request.args)
    pairs = request.env if env is None else env
    if pairs:
        manifest["env"] = _env(pairs)
    resources = _resources({**(gpus or {}), **cpu_memory}, cpu_memory)
    if resources:
        manifest["resources"] = resources
    manifest["securityContext"] = container_security_context()
    return manifest


def gpu_container(spec: JobSpec) -> dict:
    job = spec.request
    return container(GPU_CONTAINER, job.main, gpus={job.gpu_resource: str(job.gpus)})


def preprocess_container(spec: JobSpec) -> dict:
    """The preprocessing container: no GPUs, and the job's environment (and its own) with the
    node's GPUs hidden."""
    pre = spec.request.preprocess
    assert pre is not None
    env = hide_gpus((*spec.request.main.env, *pre.container.env))
    return container(PREPROCESS_CONTAINER, pre.container, env=env)


def node_affinity(spec: JobSpec, placement: Placement) -> dict:
    """The job's pod: on GPU nodes, of its GPU model when it chose one."""
    return gpu_node_affinity(spec.request.gpu_model, placement)


def gpu_node_affinity(gpu_model: str, placement: Placement) -> dict:
    """One required term for any workload's GPU pods: every GPU node label (``In [value]``),
    and the model when one was chosen."""
    expressions = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in sorted(placement.node_selector.items())
    ]
    if gpu_model:
        expressions.append(
            {"key": placement.gpu_model_label, "operator": "In", "values": [gpu_model]}
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
    job = spec.request
    job_labels = labels(spec, placement)
    annotations = {JOB_NAME_ANNOTATION: job.name}
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
        "securityContext": pod_security_context(placement),
    }
    if job.preprocess is not None:
        if job.preprocess.mode == PreprocessMode.BEFORE:
            pod_spec["initContainers"] = [preprocess_container(spec)]
        else:
            pod_spec["containers"].append(preprocess_container(spec))
    template_metadata: dict = {"labels": dict(job_labels)}
    if job.annotations:
        template_metadata["annotations"] = dict(job.annotations)
    job_spec: dict = {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": job.backoff_limit,
        "activeDeadlineSeconds": job.max_runtime_seconds,
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        "template": {"metadata": template_metadata, "spec": pod_spec},
    }
    if spec.queue:
        job_spec["suspend"] = True  # Kueue un-suspends it when it admits it
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(spec.job_id),
            "namespace": spec.namespace,
            "labels": {**job_labels, **queue_labels(spec, placement)},
            "annotations": annotations,
        },
        "spec": job_spec,
    }


def cluster_placement(cluster: Cluster) -> Placement:
    """A cluster's GPU placement rules, as its row holds them."""
    return Placement(
        node_selector={str(k): str(v) for k, v in (cluster.gpu_node_selector or {}).items()},
        gpu_taint_key=cluster.gpu_taint_key,
        gpu_model_label=cluster.gpu_model_label,
        portal_name=settings.PORTAL_NAME,
        pod_security_level=cluster.pod_security_level,
    )


def stored_job_spec(job: GpuJob) -> JobSpec:
    """The spec of a stored job (reads its team and submitter: select them with it)."""
    return JobSpec(
        job_id=job.pk,
        namespace=job.team.slug,
        request=JobRequest.from_model(job),
        ttl_seconds_after_finished=settings.GPUJOBS_TTL_SECONDS_AFTER_FINISHED,
        submitted_by=job.submitted_by.get_username(),
        queue=job.queue_name,
    )


def stored_job_manifest(job: GpuJob) -> dict:
    """The Job of a stored job on its cluster."""
    return job_manifest(stored_job_spec(job), cluster_placement(job.cluster))
