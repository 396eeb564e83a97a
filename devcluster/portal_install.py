"""The portal installed on the devcluster as a cluster admin installs it in a company: the
objects of deploy/ (the portal's namespace, its ServiceAccount and least-privilege ClusterRole,
the team roles it binds members to, and the confinement policy that keeps its writes inside the
namespaces it manages), and credentials for the portal named as that ServiceAccount. A client
certificate whose name is ``system:serviceaccount:gpu-portal:gpu-portal`` is that ServiceAccount
to RBAC and to the confinement policy, so the demo's portal acts with exactly deploy/rbac.yaml's
rights, confined, and a member's kubectl (``python -m devcluster mint portal:<username>``) meets
the team roles, as in a company.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from devcluster import cluster, credentials, kueue, pki
from devcluster.settings import Settings, current

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
# In the order an admin applies them: the namespace before what lives in it.
DEPLOY_FILES = ("namespace.yaml", "rbac.yaml", "team-roles.yaml", "portal-confinement.yaml")
PORTAL_USER = "system:serviceaccount:gpu-portal:gpu-portal"


def deploy_objects(deploy: Path = DEPLOY) -> list[dict]:
    """The objects of deploy/'s files, in order."""
    return [
        obj
        for name in DEPLOY_FILES
        for obj in yaml.safe_load_all((deploy / name).read_text())
        if obj
    ]


def install(settings: Settings | None = None, *, output: Path | None = None) -> Path:
    """Apply deploy/ as the cluster admin and mint the portal's credentials; the kubeconfig's
    path."""
    settings = settings or current()
    api = cluster.admin_api_client(settings)
    try:
        for obj in deploy_objects():
            kueue.apply(api, obj)
    finally:
        api.close()
    return credentials.mint(PORTAL_USER, settings=settings, output=output)


def credentials_only(settings: Settings | None = None, *, output: Path | None = None) -> Path:
    """The portal's kubeconfig before the cluster is up (the demo's portal starts while the
    cluster is built): the cluster's CA is made if there is none yet (``up`` keeps it, so the
    kubeconfig stays valid), nothing is applied. Until ``install`` has applied deploy/, the
    cluster refuses the portal (403) or does not answer, and the portal tries again."""
    settings = settings or current()
    pki.ensure_ca(settings.pki_dir)
    return credentials.mint(PORTAL_USER, settings=settings, output=output)
