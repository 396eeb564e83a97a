"""What a user asks the portal to run as a batch job, as frozen request objects: the job's own
fields (priority, retries, maximum run time, the preprocessing container) on the shapes every
workload shares (``workloads.specs``: containers, names, environment, annotations, bounds).

The API's serializer and the job form both build a ``JobRequest`` with ``JobRequest.parse``,
and ``services.job_submit`` takes it. The rules that depend on a team or a cluster (archived
teams, allowed registries, the cluster's GPU kinds and models, reserved annotations, quota) are
in ``gpujobs.admission``.

No database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from clusters.vocabulary import (
    DEFAULT_GPU_RESOURCE,
    GUARANTEED,
    LOCAL_QUEUES,
    MAX_RUNTIME_SECONDS,
    OPPORTUNISTIC,
)
from workloads.specs import (
    ContainerRequest,
    EnvPairs,
    Errors,
    amount_as_json,
    decimal_or_none,
    joined,
    read_annotations,
    read_gpu_model,
    read_gpu_resource,
    read_gpus,
    read_name,
    read_nested,
    read_whole,
)

MAX_BACKOFF_LIMIT = 10
MAX_BATCH_JOBS = 1000  # jobs in one batch submission


class PreprocessMode:
    BESIDE = "beside"  # a second container in the same pod, running alongside
    BEFORE = "before"  # an init container that must finish before the GPU container starts


PREPROCESS_MODES = (PreprocessMode.BEFORE, PreprocessMode.BESIDE)

# The kind of work a job is, on a cluster whose quota Kueue enforces (ignored under quota only):
# the team's LocalQueue it waits in and the WorkloadPriorityClass it runs at.
PRIORITIES = LOCAL_QUEUES
PRIORITY_HELP = (
    "Guaranteed: runs within the team's own quota and is never preempted. Opportunistic: may "
    "also borrow GPUs other teams leave idle, and is preempted (then requeued) when they need "
    "them back."
)
PREPROCESS_KEYS = {"image", "mode", "command", "args", "cpu_cores", "memory_gib"}


def read_priority(value: Any, *, errors: Errors) -> str:
    """Guaranteed (the default) or opportunistic."""
    if value is None or value == "":
        return GUARANTEED
    if value not in PRIORITIES:
        errors["priority"] = f"Choose {GUARANTEED!r} or {OPPORTUNISTIC!r}. {PRIORITY_HELP}"
        return GUARANTEED
    return value


@dataclass(frozen=True)
class PreprocessRequest:
    """A CPU-only container that prepares data for the GPU container, before it (an init
    container) or beside it (a second container). It sees the job's environment."""

    container: ContainerRequest
    mode: str = PreprocessMode.BEFORE

    @classmethod
    def read(cls, value: Any, *, errors: Errors) -> PreprocessRequest | None:
        """From ``{"image": ..., "mode": ..., "command": ..., ...}``; its bad fields are named
        together under ``preprocess``."""
        data = read_nested(
            value, errors=errors, key="preprocess", keys=PREPROCESS_KEYS, what="preprocessing"
        )
        if data is None:
            return None
        local: Errors = {}
        container = ContainerRequest.read(data, errors=local)
        mode = data.get("mode")
        if mode is None or mode == "":
            mode = PreprocessMode.BEFORE
        elif mode not in PREPROCESS_MODES:
            local["mode"] = "Mode must be 'before' (an init container) or 'beside' (alongside)."
        if local:
            errors["preprocess"] = joined(local)
            return None
        return cls(container=container, mode=mode)

    def as_json(self) -> dict:
        """The form the job's row keeps it in."""
        return {
            "image": self.container.image,
            "mode": self.mode,
            "command": list(self.container.command),
            "args": list(self.container.args),
            "cpu_cores": amount_as_json(self.container.cpu_cores),
            "memory_gib": amount_as_json(self.container.memory_gib),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PreprocessRequest:
        container = ContainerRequest(
            image=value["image"],
            command=tuple(value.get("command") or ()),
            args=tuple(value.get("args") or ()),
            cpu_cores=decimal_or_none(value.get("cpu_cores")),
            memory_gib=decimal_or_none(value.get("memory_gib")),
        )
        return cls(container=container, mode=value.get("mode") or PreprocessMode.BEFORE)


@dataclass(frozen=True)
class JobRequest:
    """A GPU job as a user asks for it: a name, the GPU container (``main``), its GPUs (how
    many, of which kind and model), how long it may run and be retried, an optional
    preprocessing container, pod annotations, and the kind of work (``priority``: guaranteed or
    opportunistic, which only a Kueue cluster tells apart). Built by ``parse``, whose checks it
    passed.

    Adding a field: here (the field, ``read``, ``model_fields`` and ``from_model``), the
    ``GpuJob`` model, the serializer and the form, and the manifest builder.
    """

    name: str
    main: ContainerRequest
    gpus: int
    max_runtime_seconds: int
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    gpu_model: str = ""
    backoff_limit: int = 0
    preprocess: PreprocessRequest | None = None
    annotations: EnvPairs = ()
    priority: str = GUARANTEED

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> JobRequest:
        """The request in ``data`` (the API's JSON body, or the form's fields in the same
        shape); one ``ValidationError`` naming every bad field."""
        request, errors = cls.read(data)
        if errors:
            raise ValidationError(errors)
        return request

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> tuple[JobRequest, Errors]:
        """The request and the errors of its bad fields, which it holds as neutral values
        (empty, the lowest bound): ``admission`` can still check the rest, so that one answer
        names every bad field. Only a request without errors may be submitted."""
        errors: Errors = {}
        runtime = data.get("max_runtime_seconds")
        backoff = data.get("backoff_limit")
        request = cls(
            name=read_name(data.get("name"), errors=errors),
            main=ContainerRequest.read(data, errors=errors),
            gpus=read_gpus(data.get("gpus"), errors=errors, what="GPUs"),
            gpu_resource=read_gpu_resource(data.get("gpu_resource"), errors=errors),
            gpu_model=read_gpu_model(data.get("gpu_model"), errors=errors),
            max_runtime_seconds=read_whole(
                settings.GPUJOBS_DEFAULT_MAX_RUNTIME_SECONDS if runtime is None else runtime,
                errors=errors,
                key="max_runtime_seconds",
                low=1,
                high=MAX_RUNTIME_SECONDS,
                what="Maximum run time (seconds)",
            ),
            backoff_limit=read_whole(
                0 if backoff is None else backoff,
                errors=errors,
                key="backoff_limit",
                low=0,
                high=MAX_BACKOFF_LIMIT,
                what="Retries",
            ),
            preprocess=PreprocessRequest.read(data.get("preprocess"), errors=errors),
            annotations=read_annotations(data.get("annotations"), errors=errors),
            priority=read_priority(data.get("priority"), errors=errors),
        )
        return request, errors

    def model_fields(self) -> dict[str, Any]:
        """The ``GpuJob`` fields that hold the request."""
        return {
            "name": self.name,
            "image": self.main.image,
            "command": list(self.main.command),
            "args": list(self.main.args),
            "env": [{"name": name, "value": value} for name, value in self.main.env],
            "gpus": self.gpus,
            "gpu_resource": self.gpu_resource,
            "gpu_model": self.gpu_model,
            "cpu_cores": self.main.cpu_cores,
            "memory_gib": self.main.memory_gib,
            "max_runtime_seconds": self.max_runtime_seconds,
            "backoff_limit": self.backoff_limit,
            "preprocess": self.preprocess.as_json() if self.preprocess else None,
            "annotations": dict(self.annotations),
            "priority": self.priority,
        }

    @classmethod
    def from_model(cls, job: Any) -> JobRequest:
        """The request a stored ``GpuJob`` holds (its fields passed ``parse`` when it was
        submitted); annotations sorted, so a job always gives the same manifest."""
        main = ContainerRequest(
            image=job.image,
            command=tuple(job.command or ()),
            args=tuple(job.args or ()),
            env=tuple((e["name"], e.get("value", "")) for e in job.env or ()),
            cpu_cores=job.cpu_cores,
            memory_gib=job.memory_gib,
        )
        return cls(
            name=job.name,
            main=main,
            gpus=job.gpus,
            max_runtime_seconds=job.max_runtime_seconds,
            gpu_resource=job.gpu_resource,
            gpu_model=job.gpu_model,
            backoff_limit=job.backoff_limit,
            preprocess=PreprocessRequest.from_json(job.preprocess) if job.preprocess else None,
            annotations=tuple(sorted((job.annotations or {}).items())),
            priority=job.priority,
        )
