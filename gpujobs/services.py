"""Changes to GPU jobs. Views, serializers, tasks and the watcher call these and nothing else.

``job_submit`` and ``job_cancel`` validate first (``ValidationError`` naming every bad field,
``PermissionDenied``, ``InvalidTransition``) and then write in one transaction, enqueueing the
cluster work after commit. The cluster side (``job_create_on_cluster``,
``job_delete_from_cluster``) is safe to run twice: the Job's name comes from the job's id, a
second create finds the first one, and a worker claims a job with a conditional update before
creating it. What the cluster then shows is recorded by ``recording``.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import OperationalError

from clusters.kube import ClusterNotConfigured, KubeError, TransientKubeError
from clusters.models import Cluster
from clusters.workloads import QuotaExceeded, WorkloadClient
from gpujobs import manifests, selectors
from gpujobs.models import MAX_BACKOFF_LIMIT, MAX_GPUS_PER_JOB, MAX_RUNTIME_SECONDS, GpuJob
from gpujobs.observe import FINAL_STATES, QUOTA_USED_UP, Reason
from gpujobs.permissions import can_stop_job, can_submit_jobs
from gpujobs.recording import record_finished
from tenants.errors import InvalidTransition
from tenants.models import Team
from tenants.services import audit, schedule_reconcile

logger = logging.getLogger(__name__)

State = GpuJob.State

# Input bounds: anything beyond them is a mistake, and must be refused before the database.
MAX_LIST_ITEMS = 256
MAX_ARG_LENGTH = 4096
MAX_ENV_VARS = 128
MAX_ENV_VALUE_LENGTH = 32_768
MAX_ANNOTATIONS = 32
MAX_ANNOTATION_VALUE_LENGTH = 1024
MAX_CPU_CORES = Decimal("1000")
MAX_MEMORY_GIB = Decimal("100000")

NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._ -]{0,61}[A-Za-z0-9])?\Z")
ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
ANNOTATION_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
# A container image reference: [registry[:port]/]path[:tag][@digest].
IMAGE_RE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?\Z"
)
# Kubernetes' own annotation prefixes (and their subdomains), and the portal's own prefix.
RESERVED_ANNOTATION_DOMAINS = ("kubernetes.io", "k8s.io")
PORTAL_ANNOTATION_PREFIX = manifests.JOB_ID_LABEL.partition("/")[0]
PREPROCESS_KEYS = {"image", "mode", "command", "args", "cpu_cores", "memory_gib"}

# --- checks ------------------------------------------------------------------------------------


def image_registry(image: str) -> str:
    """The registry an image is pulled from; Docker Hub for references without one."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def qualified_image(image: str) -> str:
    """``busybox`` -> ``docker.io/library/busybox``: the form registry prefixes are matched to."""
    registry = image_registry(image)
    if image.startswith(f"{registry}/"):
        return image
    return f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"


def image_allowed(image: str, allowed: Sequence[str]) -> bool:
    """Whether the image comes from one of the allowed registries (or registry paths).

    An entry matches whole path segments: ``registry.example.com`` allows
    ``registry.example.com/anything`` but not ``registry.example.com.evil.net/x``. An empty list
    allows every image.
    """
    entries = [entry.strip() for entry in allowed if str(entry).strip()]
    if not entries:
        return True
    candidates = {image, qualified_image(image)}
    for entry in entries:
        prefix = entry if entry.endswith("/") else f"{entry}/"
        if any(candidate.startswith(prefix) for candidate in candidates):
            return True
    return False


def _check_image(image: Any, *, cluster: Cluster, errors: dict, key: str) -> None:
    if not isinstance(image, str) or not image.strip():
        errors[key] = "Give the container image, e.g. registry.example.com/team/trainer:1.2."
        return
    if len(image) > 500 or not IMAGE_RE.match(image):
        errors[key] = (
            f"{image[:100]!r} is not a container image reference "
            "([registry/]path[:tag][@digest], lower-case path)."
        )
        return
    allowed = cluster.allowed_registries or []
    if not image_allowed(image, allowed):
        errors[key] = (
            f"Image {image} is pulled from {image_registry(image)}, which cluster {cluster.name} "
            f"does not allow. Allowed registries: {', '.join(allowed)}."
        )


def _check_strings(value: Any, *, errors: dict, key: str, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        errors[key] = (
            f"Give the {what} as a list of strings, one item per argument "
            '(e.g. ["python", "train.py"]), never as one shell string.'
        )
        return ()
    if len(value) > MAX_LIST_ITEMS:
        errors[key] = f"At most {MAX_LIST_ITEMS} items; {len(value)} were given."
        return ()
    for index, item in enumerate(value):
        if not isinstance(item, str):
            errors[key] = f"Item {index} is not a string."
            return ()
        if len(item) > MAX_ARG_LENGTH or "\x00" in item:
            errors[key] = f"Item {index} is longer than {MAX_ARG_LENGTH} characters or has a NUL."
            return ()
    return tuple(value)


def normalise_env(value: Any, *, errors: dict, key: str = "env") -> tuple[tuple[str, str], ...]:
    """Environment variables from ``[{"name": ..., "value": ...}]`` or ``{"NAME": "value"}``."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)):
        pairs = []
        for index, item in enumerate(value):
            if not isinstance(item, Mapping) or set(item) - {"name", "value"} or "name" not in item:
                errors[key] = f'Item {index} must be {{"name": ..., "value": ...}}.'
                return ()
            pairs.append((item["name"], item.get("value", "")))
    else:
        errors[key] = 'Give environment variables as [{"name": ..., "value": ...}].'
        return ()
    if len(pairs) > MAX_ENV_VARS:
        errors[key] = f"At most {MAX_ENV_VARS} variables; {len(pairs)} were given."
        return ()
    seen = set()
    for name, val in pairs:
        if not isinstance(name, str) or not ENV_NAME_RE.match(name):
            errors[key] = (
                f"{name!r} is not a valid variable name (letters, digits, '_', '-', '.', not "
                "starting with a digit)."
            )
            return ()
        if name in seen:
            errors[key] = f"{name} is given twice."
            return ()
        seen.add(name)
        if not isinstance(val, str) or len(val) > MAX_ENV_VALUE_LENGTH or "\x00" in val:
            errors[key] = (
                f"The value of {name} must be a string of at most "
                f"{MAX_ENV_VALUE_LENGTH:,} characters."
            )
            return ()
    return tuple(pairs)


def _decimal(value: Any, *, errors: dict, key: str, what: str, maximum: Decimal):
    if value is None or value == "":
        return None
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        errors[key] = f"{what} must be a number."
        return None
    if not number.is_finite() or number <= 0 or number > maximum:
        errors[key] = f"{what} must be above 0 and at most {maximum:,}."
        return None
    if number != number.quantize(Decimal("0.01")):
        errors[key] = f"{what} takes at most two decimal places."
        return None
    return number


def _cpu_and_memory(
    spec: Mapping[str, Any], *, errors: dict
) -> tuple[Decimal | None, Decimal | None]:
    """A container's optional CPU cores and memory (GiB), each within the portal's bounds."""
    cpu = _decimal(spec.get("cpu_cores"), errors=errors, key="cpu_cores", what="CPU cores",
                   maximum=MAX_CPU_CORES)  # fmt: skip
    memory = _decimal(spec.get("memory_gib"), errors=errors, key="memory_gib",
                      what="Memory (GiB)", maximum=MAX_MEMORY_GIB)  # fmt: skip
    return cpu, memory


def _whole(value: Any, *, errors: dict, key: str, low: int, high: int, what: str) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        errors[key] = f"{what} must be a whole number."
        return None
    if not low <= value <= high:
        errors[key] = f"{what} must be between {low:,} and {high:,}; {value:,} was given."
        return None
    return value


def _check_annotations(value: Any, *, errors: dict) -> dict[str, str]:
    if not value:
        return {}
    if not isinstance(value, Mapping):
        errors["annotations"] = 'Give annotations as {"key": "value"}.'
        return {}
    if len(value) > MAX_ANNOTATIONS:
        errors["annotations"] = f"At most {MAX_ANNOTATIONS} annotations."
        return {}
    for key, val in value.items():
        prefix, _, name = key.rpartition("/") if isinstance(key, str) else ("", "", "")
        if (
            not isinstance(key, str)
            or not ANNOTATION_NAME_RE.match(name)
            or (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN_RE.match(prefix)))
        ):
            errors["annotations"] = f"{key!r} is not a valid annotation key."
            return {}
        if prefix == PORTAL_ANNOTATION_PREFIX or any(
            prefix == domain or prefix.endswith(f".{domain}")
            for domain in RESERVED_ANNOTATION_DOMAINS
        ):
            errors["annotations"] = (
                f"{key} is reserved for Kubernetes and the portal; jobs cannot set it."
            )
            return {}
        if not isinstance(val, str) or len(val) > MAX_ANNOTATION_VALUE_LENGTH:
            errors["annotations"] = (
                f"The value of {key} must be a string of at most "
                f"{MAX_ANNOTATION_VALUE_LENGTH} characters."
            )
            return {}
    return dict(value)


def _check_preprocess(value: Any, *, cluster: Cluster, errors: dict) -> dict | None:
    if not value:
        return None
    if not isinstance(value, Mapping):
        errors["preprocess"] = 'Give the preprocessing container as {"image": ..., ...}.'
        return None
    unknown = set(value) - PREPROCESS_KEYS
    if unknown:
        known = ", ".join(sorted(PREPROCESS_KEYS))
        errors["preprocess"] = f"Unknown keys {', '.join(sorted(unknown))}; allowed: {known}."
        return None
    local: dict[str, str] = {}
    _check_image(value.get("image"), cluster=cluster, errors=local, key="image")
    mode = value.get("mode") or manifests.PreprocessMode.BEFORE
    if mode not in (manifests.PreprocessMode.BEFORE, manifests.PreprocessMode.BESIDE):
        local["mode"] = "Mode must be 'before' (an init container) or 'beside' (alongside)."
    command = _check_strings(value.get("command"), errors=local, key="command", what="command")
    args = _check_strings(value.get("args"), errors=local, key="args", what="arguments")
    cpu, memory = _cpu_and_memory(value, errors=local)
    if local:
        errors["preprocess"] = " ".join(f"{k}: {v}" for k, v in local.items())
        return None
    return {
        "image": value["image"],
        "mode": mode,
        "command": list(command),
        "args": list(args),
        "cpu_cores": str(cpu) if cpu is not None else None,
        "memory_gib": str(memory) if memory is not None else None,
    }


def check_quota(*, team: Team, cluster: Cluster, gpu_resource: str, gpus: int) -> None:
    """The job's GPUs must fit in what the team's grants in effect leave after its unfinished
    jobs. The caller must hold the team's row lock, or two submissions could both fit."""
    figures = selectors.quota_left(team=team, cluster=cluster, gpu_resource=gpu_resource)
    if gpus <= figures.left:
        return
    over = gpus - figures.left
    if figures.granted == 0:
        text = (
            f"{QUOTA_USED_UP}: team {team.slug} has no {gpu_resource} quota in effect on "
            f"cluster {cluster.name}, so 0 are left; this job asks for {gpus}, exceeding it by "
            f"{over}. A team lead can request quota."
        )
    else:
        text = (
            f"{QUOTA_USED_UP}: team {team.slug} has {figures.granted} × {gpu_resource} on "
            f"cluster {cluster.name}, {figures.held} held by its unfinished jobs, so "
            f"{figures.left} left; this job asks for {gpus}, exceeding it by {over}."
        )
    raise ValidationError({"gpus": text})


def check_job_spec(*, team: Team, cluster: Cluster, spec: dict) -> dict:
    """Every field of a new job, normalised; one ValidationError naming every bad field."""
    errors: dict[str, str] = {}
    name = spec.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors["name"] = (
            "Give a short name (1-63 letters, digits, spaces, '.', '_' or '-', starting and "
            "ending with a letter or digit)."
        )
    if team.archived_at is not None:
        errors["team"] = f"Team {team.slug} is archived and cannot run jobs."
    _check_image(spec.get("image"), cluster=cluster, errors=errors, key="image")
    command = _check_strings(spec.get("command"), errors=errors, key="command", what="command")
    args = _check_strings(spec.get("args"), errors=errors, key="args", what="arguments")
    env = normalise_env(spec.get("env"), errors=errors)
    gpus = _whole(
        spec.get("gpus"), errors=errors, key="gpus", low=1, high=MAX_GPUS_PER_JOB, what="GPUs"
    )
    gpu_resource = spec.get("gpu_resource") or "nvidia.com/gpu"
    offered = selectors.gpu_resources(cluster)
    if gpu_resource not in offered:
        errors["gpu_resource"] = (
            f"Cluster {cluster.name} has no GPUs of kind {gpu_resource!r}; it offers: "
            f"{', '.join(offered)}."
        )
    gpu_model = spec.get("gpu_model") or ""
    models = selectors.gpu_models(cluster)
    if not isinstance(gpu_model, str) or len(gpu_model) > 63 or not LABEL_VALUE_RE.match(gpu_model):
        errors["gpu_model"] = "Not a GPU model name (a Kubernetes label value)."
    elif gpu_model and models and gpu_model not in models:
        errors["gpu_model"] = (
            f"Cluster {cluster.name} has no {gpu_model} GPUs; it has: {', '.join(models)}."
        )
    cpu, memory = _cpu_and_memory(spec, errors=errors)
    runtime = spec.get("max_runtime_seconds")
    if runtime is None:
        runtime = settings.GPUJOBS_DEFAULT_MAX_RUNTIME_SECONDS
    runtime = _whole(
        runtime,
        errors=errors,
        key="max_runtime_seconds",
        low=1,
        high=MAX_RUNTIME_SECONDS,
        what="Maximum run time (seconds)",
    )
    backoff = spec.get("backoff_limit")
    backoff = _whole(
        0 if backoff is None else backoff,
        errors=errors,
        key="backoff_limit",
        low=0,
        high=MAX_BACKOFF_LIMIT,
        what="Retries",
    )
    preprocess = _check_preprocess(spec.get("preprocess"), cluster=cluster, errors=errors)
    annotations = _check_annotations(spec.get("annotations"), errors=errors)
    if errors:
        raise ValidationError(errors)
    return {
        "name": name,
        "image": spec["image"],
        "command": list(command),
        "args": list(args),
        "env": [{"name": k, "value": v} for k, v in env],
        "gpus": gpus,
        "gpu_resource": gpu_resource,
        "gpu_model": gpu_model,
        "cpu_cores": cpu,
        "memory_gib": memory,
        "max_runtime_seconds": runtime,
        "backoff_limit": backoff,
        "preprocess": preprocess,
        "annotations": annotations,
    }


# --- submit and cancel -------------------------------------------------------------------------


def _job_snapshot(job: GpuJob) -> dict:
    return {
        "name": job.name,
        "cluster_id": job.cluster_id,
        "image": job.image,
        "gpus": job.gpus,
        "gpu_resource": job.gpu_resource,
        "gpu_model": job.gpu_model,
        "state": job.state,
    }


def job_submit(*, user: User, team: Team, cluster: Cluster, **spec: Any) -> GpuJob:
    """Store a new job (queued) once it passed every check, and create it on the cluster after
    commit. ``spec`` takes the ``GpuJob`` spec fields (name, image, command, args, env, gpus,
    gpu_resource, gpu_model, cpu_cores, memory_gib, max_runtime_seconds, backoff_limit,
    preprocess, annotations)."""
    if not can_submit_jobs(user, team):
        raise PermissionDenied(f"Only leads and members of {team.slug} can run jobs there.")
    fields = check_job_spec(team=team, cluster=cluster, spec=spec)
    with transaction.atomic():
        # Lock the team's row: two submissions at once must not both fit in the same quota.
        Team.objects.select_for_update().get(pk=team.pk)
        check_quota(
            team=team, cluster=cluster, gpu_resource=fields["gpu_resource"], gpus=fields["gpus"]
        )
        job = GpuJob.objects.create(
            team=team,
            cluster=cluster,
            submitted_by=user,
            state=State.QUEUED,
            message="Waiting for a worker to create it on the cluster.",
            state_changed_at=timezone.now(),
            **fields,
        )
        audit(
            actor=user,
            action="gpu_job.submitted",
            target=job,
            team=team,
            before=None,
            after=_job_snapshot(job),
        )
        job_id = job.pk
        transaction.on_commit(lambda: enqueue_submit(job_id=job_id))
    return job


def job_cancel(*, actor: User, job: GpuJob) -> GpuJob:
    """Stop the job: it shows cancelled at once, and its Job and pods are deleted after commit."""
    if not can_stop_job(actor, job):
        raise PermissionDenied(f"Only leads and members of {job.team.slug} can stop its jobs.")
    with transaction.atomic():
        locked = GpuJob.objects.select_for_update().get(pk=job.pk)
        if locked.state in FINAL_STATES:
            raise InvalidTransition(
                f"Cannot stop job #{locked.pk}: it is already {locked.state}.",
                current_state=locked.state,
            )
        before = _job_snapshot(locked)
        now = timezone.now()
        locked.state = State.CANCELLED
        locked.reason = Reason.CANCELLED
        locked.message = f"Stopped by {actor.get_username()}."
        locked.cancelled_by = actor
        locked.finished_at = now
        locked.state_changed_at = now
        locked.save(
            update_fields=[
                "state",
                "reason",
                "message",
                "cancelled_by",
                "finished_at",
                "state_changed_at",
            ]
        )
        audit(
            actor=actor,
            action="gpu_job.cancelled",
            target=locked,
            team=locked.team,
            before=before,
            after=_job_snapshot(locked),
        )
        job_id = locked.pk
        transaction.on_commit(lambda: enqueue_delete(job_id=job_id))
    return locked


def _send(task, **kwargs) -> None:
    """Send a task; if the broker is unreachable, log it: the periodic resync catches up."""
    try:
        task.delay(**kwargs)
    except OperationalError:
        logger.exception("Could not enqueue %s(%s); the resync will", task.name, kwargs)


def enqueue_submit(*, job_id: int) -> None:
    from gpujobs.tasks import submit_job  # tasks import this module

    _send(submit_job, job_id=job_id)


def enqueue_delete(*, job_id: int) -> None:
    from gpujobs.tasks import delete_job

    _send(delete_job, job_id=job_id)


# --- the cluster side --------------------------------------------------------------------------


def placement(cluster: Cluster) -> manifests.Placement:
    return manifests.Placement(
        node_selector={str(k): str(v) for k, v in (cluster.gpu_node_selector or {}).items()},
        gpu_taint_key=cluster.gpu_taint_key,
        gpu_model_label=cluster.gpu_model_label,
        portal_name=settings.PORTAL_NAME,
    )


def job_spec(job: GpuJob) -> manifests.JobSpec:
    pre = job.preprocess
    preprocess = None
    if pre:
        preprocess = manifests.Preprocess(
            image=pre["image"],
            mode=pre.get("mode") or manifests.PreprocessMode.BEFORE,
            command=tuple(pre.get("command") or ()),
            args=tuple(pre.get("args") or ()),
            cpu_cores=Decimal(pre["cpu_cores"]) if pre.get("cpu_cores") else None,
            memory_gib=Decimal(pre["memory_gib"]) if pre.get("memory_gib") else None,
        )
    return manifests.JobSpec(
        job_id=job.pk,
        namespace=job.team.slug,
        name=job.name,
        image=job.image,
        gpus=job.gpus,
        max_runtime_seconds=job.max_runtime_seconds,
        ttl_seconds_after_finished=settings.GPUJOBS_TTL_SECONDS_AFTER_FINISHED,
        command=tuple(job.command or ()),
        args=tuple(job.args or ()),
        env=tuple((e["name"], e.get("value", "")) for e in job.env or ()),
        gpu_resource=job.gpu_resource,
        gpu_model=job.gpu_model,
        cpu_cores=job.cpu_cores,
        memory_gib=job.memory_gib,
        backoff_limit=job.backoff_limit,
        preprocess=preprocess,
        annotations=tuple(sorted((job.annotations or {}).items())),
        submitted_by=job.submitted_by.get_username(),
    )


def job_manifest(job: GpuJob) -> dict:
    return manifests.job_manifest(job_spec(job), placement(job.cluster))


def _owned_by(job_obj: dict, job: GpuJob) -> bool:
    labels = (job_obj.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(manifests.JOB_ID_LABEL) == str(job.pk)
        and labels.get(manifests.TEAM_LABEL) == job.team.slug
        and labels.get(manifests.MANAGED_BY_LABEL) == settings.PORTAL_NAME
    )


class NamespaceNotReady(TransientKubeError):
    """The team's namespace is not on the cluster yet although the team holds quota there: the
    submission is retried (with backoff, then by the periodic resync) while it is created."""


def job_create_on_cluster(*, job_id: int, kube: WorkloadClient | None = None) -> str:
    """Create the job's Job on its cluster, once. Returns what happened, in words.

    A worker claims the job first (a conditional update on ``queued`` and an expired claim), so
    two workers never create it at once; a worker that dies holding the claim leaves it to
    expire and the periodic resync enqueues the job again. Creating finds a Job of the same
    name made by an earlier attempt (AlreadyExists is success). Transient cluster errors are
    raised for the task to retry, with the claim released.
    """
    now = timezone.now()
    lease = now - datetime.timedelta(seconds=settings.GPUJOBS_CLAIM_SECONDS)
    claimed = GpuJob.objects.filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=lease), pk=job_id, state=State.QUEUED
    ).update(claimed_at=now, submit_attempts=F("submit_attempts") + 1)
    if claimed != 1:
        return "not queued, or another worker holds it"
    job = GpuJob.objects.select_related("team", "cluster", "submitted_by").get(pk=job_id)
    try:
        kube = kube or WorkloadClient.for_cluster(job.cluster)
        job_obj, created = kube.create_job(job_manifest(job))
    except TransientKubeError as error:
        # Let the retry (or another worker) claim it again, and say why it still waits.
        GpuJob.objects.filter(pk=job_id, claimed_at=now).update(
            claimed_at=None, message=f"Not on the cluster yet; trying again: {error}"
        )
        raise
    except QuotaExceeded as error:
        record_finished(
            job_id,
            state=State.FAILED,
            reason=Reason.EXCEEDED_QUOTA,
            message=f"{QUOTA_USED_UP}: {error}",
            only_from=[State.QUEUED],
        )
        return "refused by the cluster's quota"
    except KubeError as error:
        message = str(error)
        if "namespaces" in message and "not found" in message:
            if selectors.namespace_on_its_way(team_id=job.team_id, cluster_id=job.cluster_id):
                # Granted, but the reconcile that creates the namespace has not run yet (or the
                # cluster was rebuilt): ask for it now and try again, rather than fail the job.
                schedule_reconcile(team_id=job.team_id, cluster_id=job.cluster_id)
                waiting = (
                    f"Waiting for team {job.team.slug}'s namespace on cluster {job.cluster.name}: "
                    "the portal is applying its quota there; trying again."
                )
                GpuJob.objects.filter(pk=job_id, claimed_at=now).update(
                    claimed_at=None, message=waiting
                )
                raise NamespaceNotReady(waiting) from error
            message = (
                f"Team {job.team.slug} has no namespace on cluster {job.cluster.name} (no active "
                f"quota there). {error}"
            )
        if isinstance(error, ClusterNotConfigured):
            message = f"The portal cannot reach cluster {job.cluster.name}: {error}"
        record_finished(
            job_id,
            state=State.FAILED,
            reason=Reason.SUBMIT_FAILED,
            message=message,
            only_from=[State.QUEUED],
        )
        return f"failed: {message}"
    metadata = job_obj.get("metadata") or {}
    if not created and not _owned_by(job_obj, job):
        record_finished(
            job_id,
            state=State.FAILED,
            reason=Reason.SUBMIT_FAILED,
            message=f"A Job named {metadata.get('name')} already exists in namespace "
            f"{job.team.slug} and was not made by the portal for this job; it is left "
            "alone.",
            only_from=[State.QUEUED],
        )
        return "name taken by someone else's Job"
    uid = metadata.get("uid") or ""
    # After the create returned: a list of Jobs begun later must hold this one (the watcher
    # relies on that to tell a deleted Job from one it has not seen yet).
    created_at = timezone.now()
    marked = GpuJob.objects.filter(pk=job_id, state=State.QUEUED).update(
        state=State.SUBMITTED,
        submitted_at=created_at,
        kube_uid=uid,
        state_changed_at=timezone.now(),
        message="Created on the cluster; waiting for the job controller.",
    )
    if marked:
        return "created" if created else "found created by an earlier attempt"
    current = GpuJob.objects.get(pk=job_id)
    if current.state == State.CANCELLED:
        # Stopped while it was being created: the stop wins.
        kube.delete_job(job.team.slug, job.kube_name, propagation="Background", uid=uid or None)
        return "cancelled meanwhile; deleted again"
    # The watcher saw the Job first and moved the row on; keep its uid and submission time.
    GpuJob.objects.filter(pk=job_id).update(
        kube_uid=uid, submitted_at=Coalesce(F("submitted_at"), created_at)
    )
    return "created (the watcher saw it first)"


def job_delete_from_cluster(*, job_id: int, kube: WorkloadClient | None = None) -> bool:
    """Delete a cancelled job's Job and its pods (Foreground: the pods go first)."""
    job = GpuJob.objects.select_related("team", "cluster").filter(pk=job_id).first()
    if job is None or job.state != State.CANCELLED:
        return False
    kube = kube or WorkloadClient.for_cluster(job.cluster)
    return kube.delete_job(
        job.team.slug, job.kube_name, propagation="Foreground", uid=job.kube_uid or None
    )


def requeue_stuck_jobs(*, older_than_seconds: int | None = None) -> list[int]:
    """Enqueue again the queued jobs no worker is creating: their message was lost (a broker
    outage) or the worker that claimed them died. The claim makes a duplicate harmless."""
    now = timezone.now()
    age = older_than_seconds
    if age is None:
        age = settings.GPUJOBS_REQUEUE_AFTER_SECONDS
    lease = now - datetime.timedelta(seconds=settings.GPUJOBS_CLAIM_SECONDS)
    ids = list(
        GpuJob.objects.filter(
            Q(claimed_at__isnull=True) | Q(claimed_at__lt=lease),
            state=State.QUEUED,
            created_at__lte=now - datetime.timedelta(seconds=age),
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for job_id in ids:
        enqueue_submit(job_id=job_id)
    return ids
