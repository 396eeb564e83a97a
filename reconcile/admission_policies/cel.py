"""The building blocks of the policies' CEL: string and list literals, a label's value, whether
a container or a pod template asks for GPUs, and the maximum run time of GPU work."""

from __future__ import annotations

from collections.abc import Iterable

from clusters.vocabulary import GPU_RESOURCE_PREFIXES, MAX_RUNTIME_SECONDS

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def cel_string(value: str) -> str:
    """A CEL string literal holding ``value`` exactly."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def cel_list(values: Iterable[str]) -> str:
    """A CEL list literal of strings."""
    return "[" + ", ".join(cel_string(value) for value in values) + "]"


def label(obj: str, key: str) -> str:
    """The value of label ``key`` of ``obj`` (CEL over its metadata), "" when it has none."""
    return (
        f"(has({obj}.metadata) && has({obj}.metadata.labels) && "
        f"{cel_string(key)} in {obj}.metadata.labels ? "
        f"{obj}.metadata.labels[{cel_string(key)}] : '')"
    )


def asks_for_gpus(container: str = "c") -> str:
    """Whether a container's limits or requests name a GPU resource."""
    gpu = " || ".join(f"r.startsWith({cel_string(prefix)})" for prefix in GPU_RESOURCE_PREFIXES)
    return (
        f"(has({container}.resources) && ("
        f"(has({container}.resources.limits) && {container}.resources.limits.exists(r, {gpu})) || "
        f"(has({container}.resources.requests) && {container}.resources.requests.exists(r, {gpu}))"
        "))"
    )


def template_asks_for_gpus(spec: str) -> str:
    """Whether a pod spec (CEL path) has a container or init container that asks for GPUs."""
    return (
        f"{spec}.containers.exists(c, {asks_for_gpus()}) || "
        f"(has({spec}.initContainers) && {spec}.initContainers.exists(c, {asks_for_gpus()}))"
    )


def runtime_validation(deadline: str) -> dict:
    """``deadline`` (a CEL path to an ``activeDeadlineSeconds``) is set, within the maximum."""
    return {
        "expression": f"(has({deadline}) && {deadline} <= {MAX_RUNTIME_SECONDS})",
        "message": f"GPU work has a maximum run time: set {deadline.removeprefix('object.')} "
        f"(at most {MAX_RUNTIME_SECONDS} seconds, {MAX_RUNTIME_SECONDS // 86400} days).",
        "reason": "Forbidden",
    }
