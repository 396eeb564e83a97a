"""The portal's least-privilege identity on the devcluster, shared by every suite whose worker
or watcher acts on the cluster: credentials bound to exactly deploy/rbac.yaml's ClusterRole, so
a verb the portal needs and the role lacks fails a test, and ``access_allowed`` to check what the
role must not allow. Minting one also installs deploy/team-roles.yaml's ClusterRoles (what the
portal binds members to), and ``confine`` installs deploy/portal-confinement.yaml for it, as a
cluster admin installs both.

deploy/ names everything after the default portal name, ``gpu-portal``; a test portal of its
own name (``portal_name``) gets the same objects renamed, as an admin deploying a portal under
another PORTAL_NAME would rename them."""

import hashlib
import json
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
DEPLOY_RBAC = DEPLOY / "rbac.yaml"
DEPLOY_TEAM_ROLES = DEPLOY / "team-roles.yaml"
DEPLOY_CONFINEMENT = DEPLOY / "portal-confinement.yaml"
DEPLOY_NAMESPACE = DEPLOY / "namespace.yaml"
DEFAULT_PORTAL_NAME = "gpu-portal"
PORTAL_SERVICE_ACCOUNT = "system:serviceaccount:gpu-portal:gpu-portal"


def _renamed(name: str, portal_name: str) -> str:
    """deploy/'s ``gpu-portal-...`` names under another portal name."""
    if portal_name != DEFAULT_PORTAL_NAME and name.startswith(f"{DEFAULT_PORTAL_NAME}-"):
        return f"{portal_name}-{name[len(DEFAULT_PORTAL_NAME) + 1 :]}"
    return name


def portal_cluster_role(portal_name: str = DEFAULT_PORTAL_NAME) -> dict:
    (role,) = [d for d in yaml.safe_load_all(DEPLOY_RBAC.read_text()) if d["kind"] == "ClusterRole"]
    for rule in role["rules"]:
        if "resourceNames" in rule:
            rule["resourceNames"] = [_renamed(n, portal_name) for n in rule["resourceNames"]]
    return role


def portal_lease_role() -> dict:
    """deploy/rbac.yaml's Role for the watcher's Leases in the portal's namespace."""
    (role,) = [d for d in yaml.safe_load_all(DEPLOY_RBAC.read_text()) if d["kind"] == "Role"]
    return role


def install_portal_namespace(admin_api: client.ApiClient) -> None:
    """deploy/namespace.yaml's namespace, the portal's own (where the watcher's Leases live),
    as a cluster admin applies it."""
    try:
        client.CoreV1Api(admin_api).create_namespace(yaml.safe_load(DEPLOY_NAMESPACE.read_text()))
    except ApiException as error:
        if error.status != 409:
            raise


def install_lease_role(admin_api: client.ApiClient, *, name: str) -> None:
    """deploy/namespace.yaml's namespace (the portal's own) and deploy/rbac.yaml's Role for
    the watcher's Leases there, bound to the user ``name``, as a cluster admin applies them."""
    rbac = client.RbacAuthorizationV1Api(admin_api)
    install_portal_namespace(admin_api)
    role = portal_lease_role()
    namespace_name = role["metadata"]["namespace"]
    role = {**role, "metadata": {**role["metadata"], "name": name}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
    }
    for create, replace, body in (
        (rbac.create_namespaced_role, rbac.replace_namespaced_role, role),
        (rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding, binding),
    ):
        _create_or_replace(
            lambda body, create=create: create(namespace_name, body),
            lambda n, body, replace=replace: replace(n, namespace_name, body),
            body,
        )


def team_cluster_roles(portal_name: str = DEFAULT_PORTAL_NAME) -> list[dict]:
    roles = list(yaml.safe_load_all(DEPLOY_TEAM_ROLES.read_text()))
    for role in roles:
        role["metadata"]["name"] = _renamed(role["metadata"]["name"], portal_name)
    return roles


def _create_or_replace(create, replace, body: dict) -> None:
    try:
        create(body)
    except ApiException as error:
        if error.status != 409:
            raise
        replace(body["metadata"]["name"], body)


def install_team_roles(admin_api: client.ApiClient, *, portal_name: str) -> None:
    """deploy/team-roles.yaml, as a cluster admin applies it."""
    rbac = client.RbacAuthorizationV1Api(admin_api)
    for role in team_cluster_roles(portal_name):
        _create_or_replace(rbac.create_cluster_role, rbac.replace_cluster_role, role)


def confinement_objects(*, user: str, portal_name: str) -> list[dict]:
    """deploy/portal-confinement.yaml for ``user`` (in place of the portal's ServiceAccount)
    and ``portal_name``, under a name of that user's own."""
    objects = list(yaml.safe_load_all(DEPLOY_CONFINEMENT.read_text()))
    name = f"{user}-confinement"
    policy, binding = objects
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    (condition,) = policy["spec"]["matchConditions"]
    assert PORTAL_SERVICE_ACCOUNT in condition["expression"]
    condition["expression"] = condition["expression"].replace(PORTAL_SERVICE_ACCOUNT, user)
    (variable,) = [v for v in policy["spec"]["variables"] if v["name"] == "portal"]
    variable["expression"] = f"'{portal_name}'"
    return objects


def confine(admin_api: client.ApiClient, *, user: str, portal_name: str) -> list[dict]:
    """Install deploy/portal-confinement.yaml for the minted portal ``user``; the objects."""
    admission = client.AdmissionregistrationV1Api(admin_api)
    policy, binding = objects = confinement_objects(user=user, portal_name=portal_name)
    _create_or_replace(
        admission.create_validating_admission_policy,
        admission.replace_validating_admission_policy,
        _with_version(admission.read_validating_admission_policy, policy),
    )
    _create_or_replace(
        admission.create_validating_admission_policy_binding,
        admission.replace_validating_admission_policy_binding,
        _with_version(admission.read_validating_admission_policy_binding, binding),
    )
    return objects


def _with_version(read, body: dict) -> dict:
    """A replace needs the current resourceVersion (admission objects are not RBAC's, which
    replace without one)."""
    try:
        current = read(body["metadata"]["name"])
    except ApiException as error:
        if error.status != 404:
            raise
        return body
    body = {**body, "metadata": {**body["metadata"]}}
    body["metadata"]["resourceVersion"] = current.metadata.resource_version
    return body


def unconfine(admin_api: client.ApiClient, objects: list[dict]) -> None:
    admission = client.AdmissionregistrationV1Api(admin_api)
    policy, binding = objects
    for delete, body in (
        (admission.delete_validating_admission_policy_binding, binding),
        (admission.delete_validating_admission_policy, policy),
    ):
        try:
            delete(body["metadata"]["name"])
        except ApiException as error:
            if error.status != 404:
                raise


def portal_identity_name(*, user: str, portal_name: str = DEFAULT_PORTAL_NAME) -> str:
    """The minted identity's user name (and its ClusterRole's): ``user`` and a digest of the
    role's rules."""
    rules = portal_cluster_role(portal_name)["rules"]
    digest = hashlib.sha256(json.dumps(rules, sort_keys=True).encode()).hexdigest()[:10]
    return f"{user}-{digest}"


def mint_portal_identity(
    devcluster, admin_api: client.ApiClient, *, user: str, portal_name: str = DEFAULT_PORTAL_NAME
) -> Path:
    """A kubeconfig for a user bound to deploy/rbac.yaml's ClusterRole and its Role for the
    watcher's Leases (in deploy/namespace.yaml's namespace) and nothing else, with
    deploy/team-roles.yaml installed (for ``portal_name``).

    The role is created under a name taken from its rules, so test sessions of other versions
    of the file sharing the devcluster never replace each other's role halfway through.
    """
    rbac = client.RbacAuthorizationV1Api(admin_api)
    install_team_roles(admin_api, portal_name=portal_name)
    role = portal_cluster_role(portal_name)
    name = portal_identity_name(user=user, portal_name=portal_name)
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
        _create_or_replace(create, replace, body)
    install_lease_role(admin_api, name=name)
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
