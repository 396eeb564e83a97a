"""Container image rules for every workload's containers: what an image reference may look like,
which registry an image comes from, and whether a cluster's allowed registries admit it. Pure.

References are read as the container runtime reads them (``clusters.image_references``), so the
portal refuses exactly what the cluster's admission policy refuses, and says so first (400).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clusters.image_references import parse_image, registry_entries, repository_allowed

MAX_IMAGE_LENGTH = 500


def read_image(value: Any, *, errors: dict[str, str], key: str) -> str:
    """The image reference in ``value`` (surrounding spaces dropped); when it is none, named
    in ``errors`` under ``key`` and given back as ""."""
    image = value.strip() if isinstance(value, str) else ""
    if not image:
        errors[key] = "Give the container image, e.g. registry.example.com/team/trainer:1.2."
        return ""
    if len(image) > MAX_IMAGE_LENGTH or parse_image(image) is None:
        errors[key] = (
            f"{image[:100]!r} is not a container image reference "
            "([registry[:port]/]path[:tag][@digest], lower-case path)."
        )
        return ""
    return image


def image_registry(image: str) -> str:
    """The registry an image is pulled from (lower case); docker.io for Docker Hub."""
    reference = parse_image(image)
    return reference.domain if reference else ""


def qualified_image(image: str) -> str:
    """``busybox:1`` -> ``docker.io/library/busybox:1``: the image as the runtime pulls it."""
    reference = parse_image(image)
    if reference is None:
        return image
    tag = f":{reference.tag}" if reference.tag else ""
    digest = f"@{reference.digest}" if reference.digest else ""
    return f"{reference.repository}{tag}{digest}"


def image_allowed(image: str, allowed: Sequence[str], *, allow_all: bool = False) -> bool:
    """Whether the image comes from one of the allowed registries (or paths under one), by
    whole path components: ``registry.example.com`` admits ``registry.example.com/anything``
    but not ``registry.example.com.evil.net/x``. An empty list admits nothing, unless
    ``allow_all``."""
    if allow_all:
        return True
    reference = parse_image(image)
    return reference is not None and repository_allowed(
        reference.repository, registry_entries(allowed)
    )


def registry_refusal(
    image: str, *, allowed: Sequence[str], cluster_name: str, allow_all: bool = False
) -> str | None:
    """Why a cluster with these allowed registries refuses the image, or None if it admits it."""
    if image_allowed(image, allowed, allow_all=allow_all):
        return None
    if not registry_entries(allowed):
        return (
            f"Cluster {cluster_name} allows images from no registry yet: an admin must list "
            "the registries its jobs may pull from (or allow all)."
        )
    return (
        f"Image {image} is pulled from {image_registry(image)}, which cluster {cluster_name} "
        f"does not allow. Allowed registries: {', '.join(allowed)}."
    )
