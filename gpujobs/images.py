"""Container image rules, for every workload: what an image reference may look like, which
registry an image comes from, and whether a cluster's allowed registries admit it. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

MAX_IMAGE_LENGTH = 500
# A container image reference: [registry[:port]/]path[:tag][@digest].
IMAGE_RE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?\Z"
)


def read_image(value: Any, *, errors: dict[str, str], key: str) -> str:
    """The image reference in ``value`` (surrounding spaces dropped); when it is none, named
    in ``errors`` under ``key`` and given back as ""."""
    image = value.strip() if isinstance(value, str) else ""
    if not image:
        errors[key] = "Give the container image, e.g. registry.example.com/team/trainer:1.2."
        return ""
    if len(image) > MAX_IMAGE_LENGTH or not IMAGE_RE.match(image):
        errors[key] = (
            f"{image[:100]!r} is not a container image reference "
            "([registry/]path[:tag][@digest], lower-case path)."
        )
        return ""
    return image


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


def registry_refusal(image: str, *, allowed: Sequence[str], cluster_name: str) -> str | None:
    """Why a cluster with these allowed registries refuses the image, or None if it admits it."""
    if image_allowed(image, allowed):
        return None
    return (
        f"Image {image} is pulled from {image_registry(image)}, which cluster {cluster_name} "
        f"does not allow. Allowed registries: {', '.join(allowed)}."
    )
