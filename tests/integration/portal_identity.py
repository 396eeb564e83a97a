"""The portal's least-privilege identity on the devcluster, shared by every suite whose worker
or watcher acts on the cluster: credentials bound to exactly deploy/rbac.yaml's ClusterRole, so
a verb the portal needs and the role lacks fails a test, and ``access_allowed`` to check what the
role must not allow."""

import hashlib
import json
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import REPO_ROOT

DEPLOY_RBAC = REPO_ROOT / "deploy" / "rbac.yaml"


def portal_cluster_role() -> dict:
    (role,) = [d for d in yaml.safe_load_all(DEPLOY_RBAC.read_text()) if d["kind"] == "ClusterRole"]
    return role


def mint_portal_identity(devcluster, admin_api: client.ApiClient, *, user: str) -> Path:
    """A kubeconfig for a user bound to deploy/rbac.yaml's ClusterRole and nothing else.

    The role is created under a name taken from its rules, so test sessions of other versions
    of the file sharing the devcluster never replace each other's role halfway through.
    """
    rbac = client.RbacAuthorizationV1Api(admin_api)
    role = portal_cluster_role()
    digest = hashlib.sha256(json.dumps(role["rules"], sort_keys=True).encode()).hexdigest()[:10]
    name = f"{user}-{digest}"
    role = {**role, "metadata": {**role["metadata"], "name": name}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
    }
    for create, replace, body in (
        (rbac.create_cluster_role, rbac.replace_cluster_role, role),
        (rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding, binding),
    ):
        try:
            create(body)
        except ApiException as error:
            if error.status != 409:
                raise
            replace(body["metadata"]["name"], body)
    return devcluster.mint(name)


def access_allowed(
    api: client.ApiClient,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str = "",
    namespace: str | None = None,
    name: str | None = None,
) -> bool:
    """Whether the API client's user may do this, as the apiserver's authorizer answers."""
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "resource": resource,
                    "group": group,
                    "subresource": subresource,
                    "namespace": namespace,
                    "name": name,
                }
            },
        }
    )
    return review.status.allowed
