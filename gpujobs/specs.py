"""What a user asks the portal to run, as frozen request objects, and the one place the shape of
their fields is checked: types, lengths, lists of strings, environment pairs, decimals, bounds,
the name pattern, image reference syntax, annotation key syntax, the preprocessing container.

The API's serializer and the job form both build a ``JobRequest`` with ``JobRequest.parse``,
and ``services.job_submit`` takes it. The rules that depend on a team or a cluster (archived
teams, allowed registries, the cluster's GPU kinds and models, reserved annotations, quota) are
in ``gpujobs.admission``.

A ``ContainerRequest`` (image, command, arguments, environment, CPU, memory) is the piece every
workload shares: the job's GPU container and its preprocessing container, and any later
workload's containers. No database.

The ``read_*`` helpers check one field each: a bad value is named in ``errors`` under its key,
in words, and read as a neutral value (empty, None), so that one pass names every bad field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from clusters.vocabulary import (
    DEFAULT_GPU_RESOURCE,
    GUARANTEED,
    LOCAL_QUEUES,
    MAX_RUNTIME_SECONDS,
    NVIDIA_ENV_PREFIX,
    OPPORTUNISTIC,
)
from gpujobs.images import read_image

Errors = dict[str, str]
EnvPairs = tuple[tuple[str, str], ...]

# Bounds: anything beyond them is a mistake, and must be refused before the database.
MAX_GPUS_PER_JOB = 1024
MAX_BACKOFF_LIMIT = 10
MAX_NAME_LENGTH = 63
MAX_BATCH_JOBS = 1000  # jobs in one batch submission
MAX_LIST_ITEMS = 256
MAX_ARG_LENGTH = 4096
MAX_ENV_VARS = 128
MAX_ENV_VALUE_LENGTH = 32_768
MAX_ANNOTATIONS = 32
MAX_ANNOTATION_VALUE_LENGTH = 1024
MAX_RESOURCE_NAME_LENGTH = 253
MAX_CPU_CORES = Decimal("1000")
MAX_MEMORY_GIB = Decimal("100000")

NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._ -]{0,61}[A-Za-z0-9])?\Z")
ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
ANNOTATION_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
WHOLE_RE = re.compile(r"^\s*[-+]?\d+\s*\Z")


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


def read_strings(value: Any, *, errors: Errors, key: str, what: str) -> tuple[str, ...]:
    """A list of strings, one item per argument, never one shell string."""
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


def read_env(value: Any, *, errors: Errors, key: str = "env") -> EnvPairs:
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
        if name.startswith(NVIDIA_ENV_PREFIX):
            errors[key] = (
                f"{name}: {NVIDIA_ENV_PREFIX}* variables decide which GPUs a container sees; "
                "the device plugin and the portal set them, a job cannot."
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


def read_decimal(
    value: Any, *, errors: Errors, key: str, what: str, maximum: Decimal
) -> Decimal | None:
    """An optional positive amount with at most two decimal places (None when not given)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        errors[key] = f"{what} must be a number."
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


def read_whole(value: Any, *, errors: Errors, key: str, low: int, high: int, what: str) -> int:
    """A whole number from ``low`` to ``high`` (given as a number or as digits); ``low`` when
    it is not one."""
    if isinstance(value, str) and WHOLE_RE.match(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        errors[key] = f"{what} must be a whole number."
        return low
    if not low <= value <= high:
        errors[key] = f"{what} must be between {low:,} and {high:,}; {value:,} was given."
        return low
    return value


def read_name(value: Any, *, errors: Errors) -> str:
    name = value.strip() if isinstance(value, str) else ""
    if not NAME_RE.match(name):
        errors["name"] = (
            "Give a short name (1-63 letters, digits, spaces, '.', '_' or '-', starting and "
            "ending with a letter or digit)."
        )
        return ""
    return name


def read_gpu_resource(value: Any, *, errors: Errors) -> str:
    """The extended resource the GPUs are asked for by; which ones a cluster offers is its rule."""
    if value is None or value == "":
        return DEFAULT_GPU_RESOURCE
    if not isinstance(value, str) or len(value.strip()) > MAX_RESOURCE_NAME_LENGTH:
        errors["gpu_resource"] = "Give the GPU kind as a resource name, e.g. nvidia.com/gpu."
        return DEFAULT_GPU_RESOURCE
    return value.strip() or DEFAULT_GPU_RESOURCE


def read_gpu_model(value: Any, *, errors: Errors) -> str:
    """A GPU model to run on ("" for any): a value of the cluster's GPU model node label."""
    if value is None:
        return ""
    model = value.strip() if isinstance(value, str) else value
    if not isinstance(model, str) or len(model) > 63 or not LABEL_VALUE_RE.match(model):
        errors["gpu_model"] = "Not a GPU model name (a Kubernetes label value)."
        return ""
    return model


def read_priority(value: Any, *, errors: Errors) -> str:
    """Guaranteed (the default) or opportunistic."""
    if value is None or value == "":
        return GUARANTEED
    if value not in PRIORITIES:
        errors["priority"] = f"Choose {GUARANTEED!r} or {OPPORTUNISTIC!r}. {PRIORITY_HELP}"
        return GUARANTEED
    return value


def read_annotations(value: Any, *, errors: Errors) -> EnvPairs:
    """Pod annotations as (key, value) pairs. Keys are checked for their syntax here; which
    prefixes are Kubernetes' or the portal's own is ``admission``'s rule."""
    if not value:
        return ()
    if not isinstance(value, Mapping):
        errors["annotations"] = 'Give annotations as {"key": "value"}.'
        return ()
    if len(value) > MAX_ANNOTATIONS:
        errors["annotations"] = f"At most {MAX_ANNOTATIONS} annotations."
        return ()
    for key, val in value.items():
        prefix, _, name = key.rpartition("/") if isinstance(key, str) else ("", "", "")
        if (
            not isinstance(key, str)
            or not ANNOTATION_NAME_RE.match(name)
            or (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN_RE.match(prefix)))
        ):
            errors["annotations"] = f"{key!r} is not a valid annotation key."
            return ()
        if not isinstance(val, str) or len(val) > MAX_ANNOTATION_VALUE_LENGTH:
            errors["annotations"] = (
                f"The value of {key} must be a string of at most "
                f"{MAX_ANNOTATION_VALUE_LENGTH} characters."
            )
            return ()
    return tuple(value.items())


def read_nested(
    value: Any, *, errors: Errors, key: str, keys: set[str], what: str
) -> Mapping[str, Any] | None:
    """A second container given as a mapping under ``key`` (a job's preprocessing container, a
    service's sidecar), with only ``keys``: None when it is not given or is refused (named in
    ``errors`` under ``key``). Its fields are the caller's to read, and their errors to name
    together under ``key`` (``joined``)."""
    if not value:
        return None
    if not isinstance(value, Mapping):
        errors[key] = f'Give the {what} container as {{"image": ..., ...}}.'
        return None
    unknown = set(value) - keys
    if unknown:
        known = ", ".join(sorted(keys))
        errors[key] = f"Unknown keys {', '.join(sorted(unknown))}; allowed: {known}."
        return None
    return value


def joined(local: Errors) -> str:
    """A nested container's bad fields as one message: ``image: ... mode: ...``."""
    return " ".join(f"{k}: {v}" for k, v in local.items())


def _amount(value: Decimal | None) -> str | None:
    return str(value) if value is not None else None


def _decimal_or_none(value: Any) -> Decimal | None:
    return Decimal(str(value)) if value not in (None, "") else None


@dataclass(frozen=True)
class ContainerRequest:
    """One container of a workload: what it runs, and the CPU cores and memory (GiB) it asks
    for (as much as it is limited to). Its GPUs, if any, are the workload's."""

    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: EnvPairs = ()
    cpu_cores: Decimal | None = None
    memory_gib: Decimal | None = None

    @classmethod
    def read(cls, data: Mapping[str, Any], *, errors: Errors) -> ContainerRequest:
        """The container described by ``data``'s keys (``image``, ``command``, ``args``,
        ``env``, ``cpu_cores``, ``memory_gib``), each bad one named in ``errors``."""
        return cls(
            image=read_image(data.get("image"), errors=errors, key="image"),
            command=read_strings(data.get("command"), errors=errors, key="command", what="command"),
            args=read_strings(data.get("args"), errors=errors, key="args", what="arguments"),
            env=read_env(data.get("env"), errors=errors),
            cpu_cores=read_decimal(
                data.get("cpu_cores"),
                errors=errors,
                key="cpu_cores",
                what="CPU cores",
                maximum=MAX_CPU_CORES,
            ),
            memory_gib=read_decimal(
                data.get("memory_gib"),
                errors=errors,
                key="memory_gib",
                what="Memory (GiB)",
                maximum=MAX_MEMORY_GIB,
            ),
        )


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
            "cpu_cores": _amount(self.container.cpu_cores),
            "memory_gib": _amount(self.container.memory_gib),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PreprocessRequest:
        container = ContainerRequest(
            image=value["image"],
            command=tuple(value.get("command") or ()),
            args=tuple(value.get("args") or ()),
            cpu_cores=_decimal_or_none(value.get("cpu_cores")),
            memory_gib=_decimal_or_none(value.get("memory_gib")),
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
            gpus=read_whole(
                data.get("gpus"),
                errors=errors,
                key="gpus",
                low=1,
                high=MAX_GPUS_PER_JOB,
                what="GPUs",
            ),
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
