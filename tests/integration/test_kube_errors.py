"""The devcluster's real API server answers, as the portal's errors: a quota refusal, a missing
namespace, a name already taken, a uid that no longer matches and a delete of what is gone are
each recognised from the API's status, reason and details."""

import uuid

import pytest

from clusters.kube import NotFound, QuotaExceeded
from clusters.workloads import WorkloadClient
from tests.integration.conftest import wait_for
from tests.integration.kube import create_namespace, delete_namespace

pytestmark = pytest.mark.devcluster


def job(name: str) -> dict:
    container = {"name": "main", "image": "registry.example.com/ml/trainer:1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


def in_namespace(manifest: dict, namespace: str) -> dict:
    return {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}


def counted(quota) -> bool:
    """Quota admission refuses with "exceeded quota" only once the controller counted usage."""
    return quota.status is not None and quota.status.used is not None


@pytest.fixture
def kube(devcluster) -> WorkloadClient:
    return WorkloadClient.from_kubeconfig(devcluster.kubeconfig, cluster_name="dev")


@pytest.fixture
def namespace(core):
    name = create_namespace(core, "kube-errors")
    yield name
    delete_namespace(core, name)


def test_a_quota_refusal_is_quota_exceeded_with_the_api_status(kube, core, namespace):
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "no-jobs"}, "spec": {"hard": {"count/jobs.batch": "0"}}}
    )

    wait_for(
        lambda: counted(core.read_namespaced_resource_quota("no-jobs", namespace)),
        what="the quota controller to count the namespace's jobs",
    )

    with pytest.raises(QuotaExceeded) as refused:
        kube.create_job(in_namespace(job("over-quota"), namespace))

    assert refused.value.status == 403
    assert refused.value.reason == "Forbidden"
    assert refused.value.transient is False
    assert "exceeded quota: no-jobs" in str(refused.value)


def test_a_job_in_a_namespace_that_does_not_exist_is_not_found_naming_the_namespace(kube):
    missing = f"kube-errors-missing-{uuid.uuid4().hex[:6]}"

    with pytest.raises(NotFound) as refused:
        kube.create_job(in_namespace(job("j"), missing))

    assert refused.value.status == 404
    assert refused.value.details["kind"] == "namespaces"
    assert refused.value.details["name"] == missing


def test_creating_a_taken_name_finds_the_job_that_has_it(kube, namespace):
    manifest = in_namespace(job("taken"), namespace)
    first, created = kube.create_job(manifest)

    again, created_again = kube.create_job(manifest)  # AlreadyExists, then a read

    assert (created, created_again) == (True, False)
    assert again["metadata"]["uid"] == first["metadata"]["uid"]


def test_deleting_another_job_of_the_name_or_one_that_is_gone_is_false(kube, namespace):
    manifest = in_namespace(job("short-lived"), namespace)
    kube.create_job(manifest)

    stale_uid = kube.delete_job(namespace, "short-lived", uid=str(uuid.uuid4()))  # 409 Conflict
    deleted = kube.delete_job(namespace, "short-lived", propagation="Background")
    gone = kube.delete_job(namespace, "short-lived")  # 404 NotFound

    assert (stale_uid, deleted, gone) == (False, True, False)
    assert kube.get_job(namespace, "short-lived") is None
