"""``clusters.following.follow`` against the devcluster's API server: what it puts on the queue
of changes, from its list and from its watch."""

import functools
import queue
import threading
import uuid
from dataclasses import dataclass

import pytest

from clusters import following
from clusters.workloads import WorkloadClient
from gpujobs import tracker
from tests.integration.kube import cpu_job, create_namespace, delete_namespace

pytestmark = pytest.mark.devcluster


@dataclass
class Counts:
    lists: int = 0
    resumes: int = 0


@pytest.fixture
def namespace(core):
    name = create_namespace(core, "following")
    yield name
    delete_namespace(core, name)


def test_listed_and_watched_objects_queue_as_keep_trims_them(devcluster, namespace):
    """Under load thousands of watch events wait on the queue: each waits trimmed, as the
    listed objects do, not whole (``managedFields``, the pod template)."""
    kube = WorkloadClient.from_kubeconfig(devcluster.kubeconfig, cluster_name="dev")
    mark = {"gpuportal.io/test": uuid.uuid4().hex[:10]}
    kube.create_job(cpu_job("listed", namespace, labels=mark))
    changes: queue.Queue = queue.Queue()
    stop = threading.Event()
    thread = threading.Thread(
        target=following.follow,
        args=(kube, "Job"),
        kwargs={
            "selectors": {"label_selector": ",".join(f"{k}={v}" for k, v in mark.items())},
            "changes": changes,
            "stop": stop,
            "stopping": stop.is_set,
            "watch_timeout": 5,
            "counts": Counts(),
            "cluster_name": "dev",
            "keep": functools.partial(tracker.kept, "Job"),
        },
        daemon=True,
    )
    thread.start()
    try:
        listed = changes.get(timeout=30)
        kube.create_job(cpu_job("watched", namespace, labels=mark))
        watched = changes.get(timeout=30)
        while watched.object["metadata"]["name"] != "watched":
            watched = changes.get(timeout=30)
    finally:
        stop.set()
        thread.join(timeout=30)

    assert listed.type == "LIST"
    assert [item["metadata"]["name"] for item in listed.items] == ["listed"]
    assert watched.type == "ADDED"
    for job in (listed.items[0], watched.object):
        assert "managedFields" not in job["metadata"]
        assert job["spec"]["template"]["spec"]["containers"] == [
            {"name": "main", "resources": {"limits": {}}}
        ]
