"""Container image references read the way the container runtime reads them, and the registry
entries of a cluster's allow-list. Pure; shared by the job checks (``workloads.images``), the
cluster's admission policy (``reconcile.admission_policies``, which repeats these rules in CEL) and
the validation of ``Cluster.allowed_registries``.

The grammar and the normalisation are those of ``github.com/distribution/reference``, which
containerd and Docker use (``ParseNormalizedNamed``):

* a reference is ``[host[:port]/]path[:tag][@digest]``; the path is lower case, the host may
  not be;
* the part before the first ``/`` is a registry host only when it contains ``.`` or ``:``, is
  ``localhost``, or has an upper-case letter; otherwise the whole name is a path on Docker Hub
  (``team/trainer`` is ``docker.io/team/trainer``);
* ``index.docker.io`` is ``docker.io``, and a Docker Hub path of one component is an official
  image under ``library/`` (``busybox`` and ``docker.io/busybox`` are both
  ``docker.io/library/busybox``).

A registry entry names a host (``registry.example.com``, ``localhost:5000``) or a path under
one (``registry.example.com/vision``, ``docker.io/library``); it admits that repository and
everything below it, by whole path components. Hosts are compared in lower case, as DNS does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
LEGACY_DOCKER_HUB = "index.docker.io"
OFFICIAL_PREFIX = "library/"
# The longest repository name the runtime accepts (host and path, without tag or digest).
MAX_NAME_LENGTH = 255

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"

# A whole reference, in RE2 syntax too (the admission policy matches images with it).
REFERENCE_PATTERN = rf"^(?:{_DOMAIN}/)?{_PATH}(?::{_TAG})?(?:@{_DIGEST})?$"
# A registry entry of an allow-list: a host, then optionally a path.
REGISTRY_ENTRY_PATTERN = rf"^{_DOMAIN}(?:/{_PATH})?$"

# ASCII: ``\w`` is ASCII in RE2, which the admission policy uses, and must be here too.
_REFERENCE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_PATH})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?\Z",
    re.ASCII,
)
_REGISTRY_ENTRY = re.compile(REGISTRY_ENTRY_PATTERN.replace("$", r"\Z"), re.ASCII)


@dataclass(frozen=True)
class ImageReference:
    """An image reference as the runtime resolves it: which registry (``domain``, lower case,
    ``docker.io`` for Docker Hub) and which repository there (``path``, with ``library/`` for
    official images)."""

    domain: str
    path: str
    tag: str = ""
    digest: str = ""

    @property
    def repository(self) -> str:
        """``docker.io/library/busybox``: what allow-list entries are matched against."""
        return f"{self.domain}/{self.path}"


def is_registry_host(component: str) -> bool:
    """Whether the first component of a name is a registry host (the runtime's rule)."""
    return (
        "." in component
        or ":" in component
        or component == "localhost"
        or component.lower() != component
    )


def split_domain(name: str) -> tuple[str, str]:
    """(registry, repository path) of a name without tag or digest, normalised."""
    first, slash, rest = name.partition("/")
    if slash and is_registry_host(first):
        domain, path = first.lower(), rest
    else:
        domain, path = DOCKER_HUB, name
    if domain == LEGACY_DOCKER_HUB:
        domain = DOCKER_HUB
    if domain == DOCKER_HUB and "/" not in path:
        path = f"{OFFICIAL_PREFIX}{path}"
    return domain, path


def parse_image(text: str) -> ImageReference | None:
    """The reference in ``text``, or None when the runtime would refuse it."""
    found = _REFERENCE.match(text) if isinstance(text, str) else None
    if found is None or len(found["name"]) > MAX_NAME_LENGTH:
        return None
    domain, path = split_domain(found["name"])
    return ImageReference(
        domain=domain, path=path, tag=found["tag"] or "", digest=found["digest"] or ""
    )


def parse_registry_entry(entry: str) -> str | None:
    """An allow-list entry in the form images are matched against (``registry.example.com``,
    ``docker.io/library``), or None when it names no registry host.

    The first component must be a host (``docker.io/nvidia``, not ``nvidia``): an entry is
    never read as a Docker Hub path, so that ``nvidia`` cannot mean two things. A Docker Hub
    entry of one component names an organisation (``docker.io/nvidia``); official images are
    ``docker.io/library``.
    """
    text = entry.strip().rstrip("/") if isinstance(entry, str) else ""
    if not _REGISTRY_ENTRY.match(text):
        return None
    first, _, path = text.partition("/")
    if not is_registry_host(first):
        return None
    domain = first.lower()
    if domain == LEGACY_DOCKER_HUB:
        domain = DOCKER_HUB
    return f"{domain}/{path}" if path else domain


def registry_entries(entries: Iterable[str]) -> list[str]:
    """The valid entries of an allow-list, normalised, in order, each once."""
    found: list[str] = []
    for entry in entries:
        normalised = parse_registry_entry(entry)
        if normalised is not None and normalised not in found:
            found.append(normalised)
    return found


def repository_allowed(repository: str, entries: Iterable[str]) -> bool:
    """Whether a normalised repository is one of the entries or below one (whole components:
    ``registry.example.com`` does not admit ``registry.example.com.evil.net/x``)."""
    return any(repository == entry or repository.startswith(f"{entry}/") for entry in entries)
