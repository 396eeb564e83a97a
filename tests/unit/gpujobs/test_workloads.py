"""``clusters.workloads``' watch against a stand-in ApiClient, for what the devcluster's API
server cannot be made to do on cue: a watch line split across two reads of the stream, and a
watch from a version too old to resume from (410 Gone: only once the watch cache or an etcd
compaction has moved past it). Everything else the client does is tested against the real API
server: tests/integration/test_workload_client.py and test_kube_errors.py."""

import json

import pytest

from clusters.kube import ResourceVersionExpired
from clusters.workloads import WorkloadClient


class FakeResponse:
    """A watch stream in the chunks the test chooses (a real one splits where the network
    does)."""

    def __init__(self, chunks):
        self.chunks = chunks
        self.released = False

    def stream(self, amt=None, decode_content=False):
        yield from self.chunks

    def release_conn(self):
        self.released = True


class FakeConfiguration:
    host = "https://127.0.0.1:1"


class FakeApi:
    """Answers ``call_api`` from a list of canned answers (values, or exceptions to raise)."""

    configuration = FakeConfiguration()

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def call_api(self, path, method, **kwargs):
        self.calls.append((method, path, kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def client(*answers) -> WorkloadClient:
    return WorkloadClient(FakeApi(*answers), cluster_name="gpu-east", field_manager="gpu-portal")


def line(event_type, obj) -> bytes:
    return (json.dumps({"type": event_type, "object": obj}) + "\n").encode()


def test_watch_yields_events_split_across_chunks():
    pod = {"metadata": {"name": "p", "resourceVersion": "12"}}
    data = line("ADDED", pod) + line("BOOKMARK", {"metadata": {"resourceVersion": "15"}})
    response = FakeResponse([data[:10], data[10:]])
    kube = client(response)

    events = list(kube.watch("Pod", resource_version="10", label_selector="a=b"))

    assert [(e.type, e.resource_version) for e in events] == [("ADDED", "12"), ("BOOKMARK", "15")]
    assert events[0].object["kind"] == "Pod"
    assert response.released
    (_, path, kwargs) = kube.api.calls[0]
    assert path == "/api/v1/pods"
    assert ("resourceVersion", "10") in kwargs["query_params"]
    assert ("allowWatchBookmarks", "true") in kwargs["query_params"]
    assert ("labelSelector", "a=b") in kwargs["query_params"]


def test_watch_error_410_asks_for_a_new_list():
    gone = {"kind": "Status", "code": 410, "message": "too old resource version: 1 (50)"}
    kube = client(FakeResponse([line("ERROR", gone)]))

    with pytest.raises(ResourceVersionExpired, match="Listing again"):
        list(kube.watch("Job", resource_version="1"))


def test_unknown_propagation_policy_is_refused():
    with pytest.raises(ValueError, match="propagation"):
        client().delete_job("vision", "gpujob-1", propagation="Orphan")
