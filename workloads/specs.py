"""The shape of what a user asks to run, shared by every kind of workload, and the one place
it is checked: types, lengths, lists of strings, environment pairs, decimals, bounds, the name
pattern, image reference syntax, annotation key syntax.

A ``ContainerRequest`` (image, command, arguments, environment, CPU, memory) is the piece every
workload shares: a job's GPU container and its preprocessing container, a service's model
server and sidecar. No database.

The ``read_*`` helpers check one field each: a bad value is named in ``errors`` under its key,
in words, and read as a neutral value (empty, None), so that one pass names every bad field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from clusters.vocabulary import DEFAULT_GPU_RESOURCE, NVIDIA_ENV_PREFIX
from workloads.images import read_image

Errors = dict[str, str]
EnvPairs = tuple[tuple[str, str], ...]

# Bounds: anything beyond them is a mistake, and must be refused before the database.
# GPUs one pod may ask for (a job's, or one replica of a service).
MAX_GPUS_PER_POD = 1024
MAX_NAME_LENGTH = 63
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


def read_gpus(value: Any, *, errors: Errors, what: str) -> int:
    """The GPUs one pod asks for (``gpus``): a whole number from 1 to ``MAX_GPUS_PER_POD``."""
    return read_whole(value, errors=errors, key="gpus", low=1, high=MAX_GPUS_PER_POD, what=what)


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


def amount_as_json(value: Decimal | None) -> str | None:
    """An amount of CPU or memory as stored in JSON (a string keeps its decimals exact)."""
    return str(value) if value is not None else None


def decimal_or_none(value: Any) -> Decimal | None:
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


class GpuPodRequest(Protocol):
    """What every kind of workload's request (a job's, a service revision's) has of the pods it
    asks for: the GPU container (``main``), the GPUs' kind and model, the pods' annotations."""

    @property
    def main(self) -> ContainerRequest: ...

    @property
    def gpu_resource(self) -> str: ...

    @property
    def gpu_model(self) -> str: ...

    @property
    def annotations(self) -> EnvPairs: ...
