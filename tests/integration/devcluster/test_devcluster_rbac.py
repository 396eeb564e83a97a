"""Minted users are subject to RBAC: `edit` in one namespace grants nothing in another."""

import uuid

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]


@pytest.fixture
def team_member(devcluster, k8s, namespace):
    """A freshly minted user bound to the `edit` ClusterRole in `namespace` only."""
    user = f"member-{uuid.uuid4().hex[:6]}@example.com"
    client.RbacAuthorizationV1Api(k8s).create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "member-edit"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "edit",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    kubeconfig = devcluster.mint(user, ["team-vision"])
    api = config.new_client_from_config(config_file=str(kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


def cpu_pod(name):
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.example/tool:1"}]},
    }


def test_a_user_bound_to_edit_can_create_pods_in_that_namespace(team_member, namespace):
    created = team_member.create_namespaced_pod(namespace, cpu_pod("mine"))

    assert created.metadata.namespace == namespace


def test_a_user_bound_to_edit_in_one_namespace_is_forbidden_in_another(
    team_member, other_namespace
):
    with pytest.raises(ApiException) as forbidden:
        team_member.create_namespaced_pod(other_namespace, cpu_pod("not-mine"))

    assert forbidden.value.status == 403
    assert "forbidden" in forbidden.value.body


def test_a_minted_user_carries_its_groups(devcluster, k8s):
    user = f"grouped-{uuid.uuid4().hex[:6]}"
    api = config.new_client_from_config(
        config_file=str(devcluster.mint(user, ["team-a", "team-b"]))
    )
    try:
        review = client.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
    finally:
        api.close()

    info = review.status.user_info
    assert info.username == user
    assert {"team-a", "team-b", "system:authenticated"} <= set(info.groups)
