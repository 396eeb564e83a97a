"""Self-contained kubeconfig files (certificates embedded) for the admin, components and users."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from devcluster.pki import KeyPair


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write(
    path: Path,
    server: str,
    ca_cert: Path,
    client: KeyPair,
    user: str,
    cluster_name: str = "gpuportal-devcluster",
) -> Path:
    """Write a kubeconfig that authenticates with a client certificate; return its path."""
    context = f"{user}@{cluster_name}"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client.cert),
                    "client-key-data": _b64(client.key),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
    return path
