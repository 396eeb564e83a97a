"""The portal's words for the devcluster's real refusals, beside test_kube_errors.py: each answer
the API server can be made to give becomes the ``KubeError`` subclass that says whether to retry,
carrying the API's status, reason and details, with a message that says what to do.

Throttling (429) and an API server that is unavailable (503) cannot be brought about on a healthy
API server shared with other sessions, nor a version too old to resume from (410) without
compacting its etcd: those stay in tests/unit/test_cluster_capacity.py."""

import uuid

import pytest
from kubernetes import client, config

from clusters.kube import (
    AlreadyExists,
    ClusterUnreachable,
    Conflict,
    Forbidden,
    Invalid,
    KubeClient,
    ServerError,
    Unauthorized,
)
from clusters.workloads import JOBS, WorkloadClient
from tests.integration.conftest import free_port, wait_for
from tests.integration.kube import cpu_job, create_namespace, delete_namespace, read_or_none

pytestmark = pytest.mark.devcluster

QUOTA = "gpu-portal-quota"


def quota(namespace: str, gpus: str = "2") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA, "namespace": namespace},
        "spec": {"hard": {"requests.nvidia.com/gpu": gpus}},
    }


def client_with(devcluster, **changes) -> KubeClient:
    """A portal client of the devcluster whose connection differs by ``changes`` (a host, the
    credentials) from the admin's."""
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(devcluster.kubeconfig), client_configuration=configuration
    )
    for name, value in changes.items():
        setattr(configuration, name, value)
    return KubeClient(
        client.ApiClient(configuration), cluster_name="dev", field_manager="gpu-portal"
    )


@pytest.fixture
def admin_kube(devcluster) -> WorkloadClient:
    return WorkloadClient.from_kubeconfig(devcluster.kubeconfig, cluster_name="dev")


@pytest.fixture
def namespace(core):
    name = create_namespace(core, "kube-refusals")
    yield name
    delete_namespace(core, name)


def test_a_role_without_the_right_is_forbidden_saying_who_can_fix_it(devcluster, namespace):
    nobody = KubeClient.from_kubeconfig(
        devcluster.mint("portal-without-rights"), cluster_name="dev"
    )

    with pytest.raises(Forbidden) as refused:
        nobody.apply(quota(namespace))

    error = refused.value
    assert (error.status, error.reason, error.transient) == (403, "Forbidden", True)
    assert error.details == {"name": QUOTA, "kind": "resourcequotas"}
    message = str(error)
    assert "Cluster dev does not let the portal apply" in message
    assert f"apply ResourceQuota {QUOTA} in namespace {namespace}" in message
    assert 'User "portal-without-rights" cannot patch resource "resourcequotas"' in message
    assert "deploy/rbac.yaml" in message


def test_credentials_the_api_server_does_not_accept_are_unauthorized(devcluster):
    stranger = client_with(
        devcluster, cert_file=None, key_file=None, api_key={"authorization": "Bearer not-a-token"}
    )

    with pytest.raises(Unauthorized) as refused:
        stranger.get("Namespace", "default")

    assert (refused.value.status, refused.value.transient) == (401, True)
    assert "does not accept the portal's credentials" in str(refused.value)


def test_an_invalid_object_is_invalid_and_not_retried(admin_kube, namespace):
    with pytest.raises(Invalid) as refused:
        admin_kube.apply(quota(namespace, gpus="-1"))

    assert (refused.value.status, refused.value.reason) == (422, "Invalid")
    assert refused.value.transient is False
    assert f"refused ResourceQuota {QUOTA} in namespace {namespace} as invalid" in str(
        refused.value
    )


def test_an_apply_the_api_server_fails_on_is_a_server_error_worth_retrying(admin_kube, namespace):
    # kube-apiserver v1.36.3 answers 500 to a server-side apply it cannot convert (a quantity
    # that is no quantity), rather than 422.
    with pytest.raises(ServerError) as refused:
        admin_kube.apply(quota(namespace, gpus="lots"))

    assert (refused.value.status, refused.value.transient) == (500, True)
    assert "failed to apply ResourceQuota" in str(refused.value)
    assert "The portal tries again." in str(refused.value)


def test_a_delete_of_an_object_that_was_replaced_is_a_conflict_worth_retrying(
    admin_kube, namespace
):
    admin_kube.apply(quota(namespace))

    with pytest.raises(Conflict) as refused:
        admin_kube.delete("ResourceQuota", QUOTA, namespace, uid=str(uuid.uuid4()))

    error = refused.value
    assert (error.status, error.reason, error.transient) == (409, "Conflict", True)
    assert admin_kube.get("ResourceQuota", QUOTA, namespace) is not None  # nothing deleted


def test_creating_a_taken_name_is_already_exists_with_the_details(admin_kube, namespace):
    manifest = cpu_job("taken", namespace)
    path = JOBS.path(namespace=namespace)
    admin_kube._call("POST", path, what="Job taken", body=manifest)

    with pytest.raises(AlreadyExists) as refused:
        admin_kube._call("POST", path, what="Job taken", body=manifest)

    error = refused.value
    assert (error.status, error.reason, error.transient) == (409, "AlreadyExists", False)
    assert error.details == {"name": "taken", "group": "batch", "kind": "jobs"}


def test_a_namespace_being_deleted_is_a_conflict_worth_retrying(admin_kube, core):
    name = create_namespace(core, "kube-terminating")
    # A finalizer no controller removes holds the namespace in Terminating until we do.
    hold = {"metadata": {"name": "hold", "finalizers": ["gpuportal.io/test-hold"]}}
    core.create_namespaced_config_map(name, hold)
    core.delete_namespace(name)
    wait_for(
        lambda: core.read_namespace(name).status.phase == "Terminating",
        what=f"namespace {name} to be terminating",
    )
    try:
        with pytest.raises(Conflict) as refused:
            admin_kube.apply(quota(name))
    finally:
        core.patch_namespaced_config_map("hold", name, {"metadata": {"finalizers": None}})
    wait_for(
        lambda: read_or_none(core.read_namespace, name) is None,
        timeout=60,
        what=f"namespace {name} to go",
    )

    error = refused.value
    assert (error.status, error.transient) == (403, True)
    assert any(c.get("reason") == "NamespaceTerminating" for c in error.details["causes"])
    assert "the namespace is being deleted" in str(error)


def test_an_api_server_nobody_answers_on_is_unreachable(devcluster):
    closed = client_with(devcluster, host=f"https://127.0.0.1:{free_port()}")

    with pytest.raises(ClusterUnreachable) as refused:
        closed.get("Namespace", "default")

    assert (refused.value.status, refused.value.transient) == (None, True)
    assert "Cannot reach the API server of cluster dev (https://127.0.0.1:" in str(refused.value)
