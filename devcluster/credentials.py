"""Mint credentials for arbitrary users: a client certificate signed by the cluster CA
(CN = user name, one O per group) wrapped in a kubeconfig file."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from devcluster import kubeconfig, pki
from devcluster.settings import Settings, current

_UNSAFE_FILENAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def kubeconfig_filename(user: str, groups: list[str] | tuple[str, ...]) -> str:
    """A readable, collision-free file name for a (user, groups) pair."""
    readable = _UNSAFE_FILENAME_CHARS.sub("_", user).strip("_") or "user"
    digest = hashlib.sha256("\0".join([user, *groups]).encode()).hexdigest()[:10]
    return f"{readable[:60]}-{digest}.kubeconfig"


def mint(
    user: str,
    groups: list[str] | tuple[str, ...] = (),
    settings: Settings | None = None,
    output: Path | None = None,
) -> Path:
    """Mint a client certificate for `user` in `groups` and write a kubeconfig; return its path.

    The user has no permissions until RBAC grants them (e.g. a RoleBinding to `edit`).
    """
    settings = settings or current()
    ca = pki.KeyPair(cert=settings.pki_dir / "ca.crt", key=settings.pki_dir / "ca.key")
    if not ca.key.exists():
        raise RuntimeError(f"no cluster CA in {settings.pki_dir}; start the devcluster first (up)")
    filename = kubeconfig_filename(user, groups)
    pair = pki.issue(
        ca, settings.users_dir / "certs", filename.removesuffix(".kubeconfig"), user, list(groups)
    )
    path = output or settings.users_dir / filename
    return kubeconfig.write(path, settings.apiserver_url, ca.cert, pair, user)
