"""``clusters.workloads`` against the devcluster's API server: a list followed page by page with
continue tokens keeps the version of its first page, a watch from that version sees what changed
after it, a pod's log is read by container and tail, a delete's propagation policy decides who
removes the pods, and an API server nobody answers on is unreachable.

What the real API server cannot be made to do on cue stays in tests/unit/gpujobs/test_workloads.py:
a watch line split across two reads, and a version too old to resume from (410)."""

import uuid

import pytest
from kubernetes import client, config

from clusters import workloads
from clusters.kube import ClusterUnreachable
from clusters.workloads import WorkloadClient
from tests.integration.conftest import free_port, wait_for
from tests.integration.kube import cpu_job, create_namespace, delete_namespace

pytestmark = pytest.mark.devcluster


@pytest.fixture
def kube(devcluster) -> WorkloadClient:
    return WorkloadClient.from_kubeconfig(devcluster.kubeconfig, cluster_name="dev")


@pytest.fixture
def namespace(core):
    name = create_namespace(core, "workloads")
    yield name
    delete_namespace(core, name)


@pytest.fixture
def mark() -> dict:
    """A label only this test's objects carry."""
    return {"gpuportal.io/test": uuid.uuid4().hex[:10]}


def selector(labels: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def test_a_list_follows_continue_tokens_and_a_watch_from_its_version_sees_only_what_came_after(
    kube, namespace, mark, monkeypatch
):
    monkeypatch.setattr(workloads, "LIST_PAGE_SIZE", 2)
    for i in range(5):
        kube.create_job(cpu_job(f"listed-{i}", namespace, labels=mark))
    reads = kube.reads

    listing = kube.list_objects("Job", namespace=namespace, label_selector=selector(mark))

    assert kube.reads - reads == 3  # pages of 2, 2 and 1
    assert sorted(item["metadata"]["name"] for item in listing.items) == [
        f"listed-{i}" for i in range(5)
    ]
    assert all(i["kind"] == "Job" and i["apiVersion"] == "batch/v1" for i in listing.items)
    assert listing.resource_version

    kube.create_job(cpu_job("after-the-list", namespace, labels=mark))
    events = list(
        kube.watch(
            "Job",
            resource_version=listing.resource_version,
            label_selector=selector(mark),
            timeout_seconds=3,
        )
    )

    added = [e for e in events if e.type == "ADDED"]
    assert [e.object["metadata"]["name"] for e in added] == ["after-the-list"]
    assert added[0].object["kind"] == "Job"
    assert int(added[0].resource_version) > int(listing.resource_version)


def test_the_log_of_a_container_is_read_by_its_tail(devcluster, kube, core, namespace):
    pod = {
        "metadata": {"name": "two-containers"},
        "spec": {
            "containers": [
                {"name": "main", "image": "registry.example.com/ml/trainer:1"},
                {"name": "sidecar", "image": "registry.example.com/ml/proxy:1"},
            ]
        },
    }
    core.create_namespaced_pod(namespace, pod)
    wait_for(
        lambda: core.read_namespaced_pod("two-containers", namespace).status.phase == "Running",
        what="the pod to run",
    )
    # The API server reaches a pod's log through its node's InternalIP, which kwok writes on its
    # own schedule: once (CI, 2026-12) a read came before it ("no preferred addresses found").
    node = core.read_namespaced_pod("two-containers", namespace).spec.node_name
    wait_for(lambda: core.read_node(node).status.addresses, what=f"node {node} to have addresses")
    devcluster.write_pod_log(namespace, "two-containers", ["main 1", "main 2", "main 3"])
    devcluster.write_pod_log(namespace, "two-containers", ["side 1"], container="sidecar")
    reads = kube.reads

    text = kube.pod_log(namespace, "two-containers", container="main", tail_lines=2)

    assert text == "main 2\nmain 3\n"
    assert kube.reads - reads == 1
    assert kube.pod_log(namespace, "two-containers", container="sidecar") == "side 1\n"


def running_job(kube, core, namespace, mark, name) -> dict:
    """A Job whose pod runs (on a kwok CPU node)."""
    created, _ = kube.create_job(cpu_job(name, namespace, labels=mark, suspend=False))
    wait_for(
        lambda: any(p.status.phase == "Running" for p in pods_of(core, namespace, name)),
        what=f"the pod of job {name} to run",
    )
    return created


def pods_of(core, namespace, name) -> list:
    return core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items


def test_a_background_delete_removes_the_job_at_once_and_leaves_its_pods_to_the_collector(
    kube, core, namespace, mark
):
    created = running_job(kube, core, namespace, mark, "background")

    assert kube.delete_job(
        namespace, "background", propagation="Background", uid=created["metadata"]["uid"]
    )

    assert kube.get_job(namespace, "background") is None
    # Without the propagation policy a Job's pods would be orphaned and keep running.
    wait_for(lambda: not pods_of(core, namespace, "background"), what="the collector")


def test_a_foreground_delete_keeps_the_job_until_its_pods_are_gone(kube, core, namespace, mark):
    created = running_job(kube, core, namespace, mark, "foreground")

    assert kube.delete_job(namespace, "foreground", uid=created["metadata"]["uid"])

    wait_for(lambda: kube.get_job(namespace, "foreground") is None, what="the job to go")
    assert pods_of(core, namespace, "foreground") == []  # they went first


def test_an_api_server_nobody_answers_on_is_unreachable_for_lists_watches_and_creates(
    devcluster, namespace
):
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(devcluster.kubeconfig), client_configuration=configuration
    )
    configuration.host = f"https://127.0.0.1:{free_port()}"
    closed = WorkloadClient(
        client.ApiClient(configuration), cluster_name="gpu-east", field_manager="gpu-portal"
    )
    unreachable = "Cannot reach the API server of cluster gpu-east"

    with pytest.raises(ClusterUnreachable, match=unreachable):
        list(closed.watch("Job", resource_version="1"))
    with pytest.raises(ClusterUnreachable, match=unreachable):
        closed.list_objects("Job")
    with pytest.raises(ClusterUnreachable, match=unreachable):
        closed.create_job(cpu_job("never", namespace))
