"""``python -m devcluster install-portal`` (what ``make demo`` runs): deploy/ applied as a
cluster admin applies it, and a kubeconfig for the portal's ServiceAccount, which then has
exactly deploy/rbac.yaml's rights and is confined to the namespaces the portal manages."""

import pytest
from kubernetes import client, config

from devcluster import portal_install
from tests.integration.conftest import wait_for
from tests.integration.kube import create_namespace, delete_namespace
from tests.integration.portal_identity import access_allowed

pytestmark = pytest.mark.devcluster


@pytest.fixture(scope="module")
def portal_api(devcluster, tmp_path_factory):
    kubeconfig = portal_install.install(
        devcluster.settings, output=tmp_path_factory.mktemp("portal") / "portal.kubeconfig"
    )
    api = config.new_client_from_config(config_file=str(kubeconfig))
    yield api
    api.close()


def test_the_portal_acts_as_its_service_account(portal_api):
    review = client.AuthenticationV1Api(portal_api).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )

    assert review.status.user_info.username == portal_install.PORTAL_USER


def test_it_holds_deploys_role_and_the_team_roles_are_there(portal_api, k8s):
    rbac = client.RbacAuthorizationV1Api(k8s)

    assert access_allowed(portal_api, "create", "namespaces")
    assert access_allowed(
        portal_api,
        "bind",
        "clusterroles",
        group="rbac.authorization.k8s.io",
        name="gpu-portal-member",
    )
    assert not access_allowed(portal_api, "create", "pods", namespace="kube-system")
    assert not access_allowed(portal_api, "get", "secrets", namespace="kube-system")
    assert {r.metadata.name for r in rbac.list_cluster_role().items} >= {
        "gpu-portal-lead",
        "gpu-portal-member",
        "gpu-portal-viewer",
    }


def test_it_is_confined_to_the_namespaces_the_portal_manages(portal_api, core):
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "sneaky"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "gpu-portal-member",
        },
        "subjects": [{"kind": "User", "name": "someone"}],
    }
    namespace = create_namespace(core, "not-the-portals")
    rbac = client.RbacAuthorizationV1Api(portal_api)

    def refusal():
        try:
            rbac.create_namespaced_role_binding(namespace, binding, dry_run="All")
        except client.ApiException as error:
            return error
        return None

    try:
        # A policy just applied takes a moment to reach the API server's admission.
        refused = wait_for(refusal, timeout=30, what="the confinement enforced")
    finally:
        delete_namespace(core, namespace)

    assert refused.status == 403
    assert "the portal may write only in namespaces it manages" in refused.body
