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
  waits in the queue until Kueue admits it (and un-suspends it, adding the flavor's node labels);
* opportunistic work there (``JobSpec.borrower``): the pod's termination grace period, the
  seconds its containers have between SIGTERM and SIGKILL when Kueue preempts it
  (``Cluster.preemption_grace_seconds``), and, where borrowers have a minimum run time, the
  protected borrowers' priority class (``borrower_protection`` lowers it once that time is up).

The containers, their resources and security context, and the GPU placement are any
workload's (``workloads.manifests``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from clusters.vocabulary import (
    JOB_ID_LABEL,
    JOB_NAME_ANNOTATION,
    MANAGED_BY_LABEL,
    OPPORTUNISTIC,
    PROTECTED_BORROWER,
    SUBMITTED_BY_ANNOTATION,
    TEAM_LABEL,
)
from gpujobs.specs import JobRequest, PreprocessMode
from workloads.manifests import (
    Placement,
    cluster_placement,
    container,
    gpu_node_affinity,
    gpu_toleration,
    hide_gpus,
    kueue_labels,
    pod_security_context,
)

if TYPE_CHECKING:
    from gpujobs.models import GpuJob

JOB_NAME_PREFIX = "gpujob-"
GPU_CONTAINER = "main"
PREPROCESS_CONTAINER = "preprocess"


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
    borrower: Borrower | None = None


@dataclass(frozen=True)
class Borrower:
    """How opportunistic work is preempted on its cluster: the seconds between SIGTERM and
    SIGKILL, and whether it starts protected for the cluster's minimum run time."""

    grace_seconds: int
    protected: bool = False


def borrower_of(job: GpuJob) -> Borrower | None:
    """The job's ``Borrower`` terms from its cluster's row; None unless it is opportunistic
    work in a Kueue queue."""
    if job.queue_name != OPPORTUNISTIC:
        return None
    cluster = job.cluster
    return Borrower(
        grace_seconds=cluster.preemption_grace_seconds,
        protected=cluster.borrower_min_runtime_seconds > 0,
    )


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


def queue_labels(spec: JobSpec, placement: Placement) -> dict[str, str]:
    """Kueue's labels on a queued Job: its LocalQueue and its WorkloadPriorityClass (a
    protected borrower's, when it starts protected)."""
    protected = spec.borrower is not None and spec.borrower.protected
    return kueue_labels(
        queue=spec.queue,
        priority=PROTECTED_BORROWER if protected else spec.request.priority,
        portal_name=placement.portal_name,
    )


def ownership_selector(portal_name: str) -> str:
    """The label selector that finds every Job and pod the portal made, in every namespace."""
    return f"{MANAGED_BY_LABEL}={portal_name},{JOB_ID_LABEL}"


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
    if spec.borrower is not None:
        pod_spec["terminationGracePeriodSeconds"] = spec.borrower.grace_seconds
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


def stored_job_spec(job: GpuJob) -> JobSpec:
    """The spec of a stored job (reads its team and submitter: select them with it)."""
    return JobSpec(
        job_id=job.pk,
        namespace=job.team.slug,
        request=JobRequest.from_model(job),
        ttl_seconds_after_finished=settings.GPUJOBS_TTL_SECONDS_AFTER_FINISHED,
        submitted_by=job.submitted_by.get_username(),
        queue=job.queue_name,
        borrower=borrower_of(job),
    )


def stored_job_manifest(job: GpuJob) -> dict:
    """The Job of a stored job on its cluster."""
    return job_manifest(stored_job_spec(job), cluster_placement(job.cluster))
