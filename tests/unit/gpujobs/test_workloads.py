"""``clusters.workloads``' watch and create against a stand-in ApiClient: lines become events,
410 Gone asks for a new list, AlreadyExists finds the existing Job, quota refusals read well."""

import json

import pytest
from kubernetes.client.rest import ApiException

from clusters.kube import ClusterUnreachable, QuotaExceeded, ResourceVersionExpired
from clusters.workloads import WorkloadClient


class FakeResponse:
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


def api_error(status, reason="", message=""):
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "reason": reason, "message": message})
    return error


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


def test_watch_that_cannot_connect_is_unreachable():
    kube = client(OSError("connection refused"))

    with pytest.raises(ClusterUnreachable, match="Cannot reach the API server of cluster gpu-east"):
        list(kube.watch("Job", resource_version="1"))


def test_list_follows_continue_tokens_and_keeps_the_first_resource_version():
    first = {"metadata": {"resourceVersion": "100", "continue": "tok"}, "items": [{"a": 1}]}
    second = {"metadata": {"resourceVersion": "100"}, "items": [{"a": 2}]}
    kube = client(first, second)

    listing = kube.list_objects("Job", label_selector="x")

    assert [i["a"] for i in listing.items] == [1, 2]
    assert all(i["kind"] == "Job" and i["apiVersion"] == "batch/v1" for i in listing.items)
    assert listing.resource_version == "100"
    assert ("continue", "tok") in kube.api.calls[1][2]["query_params"]


def test_create_job_that_exists_returns_the_existing_one():
    existing = {"metadata": {"name": "gpujob-1", "uid": "u1"}}
    kube = client(api_error(409, "AlreadyExists", 'jobs.batch "gpujob-1" already exists'), existing)

    job, created = kube.create_job({"metadata": {"name": "gpujob-1", "namespace": "vision"}})

    assert created is False
    assert job == existing
    assert kube.api.calls[1][:2] == ("GET", "/apis/batch/v1/namespaces/vision/jobs/gpujob-1")


def test_create_job_refused_by_quota_says_so():
    kube = client(
        api_error(403, "Forbidden", 'jobs.batch "gpujob-1" is forbidden: exceeded quota: q')
    )

    with pytest.raises(QuotaExceeded, match="exceeded quota"):
        kube.create_job({"metadata": {"name": "gpujob-1", "namespace": "vision"}})


def test_delete_job_sends_the_propagation_policy_and_uid():
    kube = client({})

    assert kube.delete_job("vision", "gpujob-1", propagation="Background", uid="u1") is True
    (method, path, kwargs) = kube.api.calls[0]
    assert (method, path) == ("DELETE", "/apis/batch/v1/namespaces/vision/jobs/gpujob-1")
    assert kwargs["body"]["propagationPolicy"] == "Background"
    assert kwargs["body"]["preconditions"] == {"uid": "u1"}


def test_delete_job_that_is_gone_is_false():
    assert client(api_error(404, "NotFound")).delete_job("vision", "gpujob-1") is False


def test_unknown_propagation_policy_is_refused():
    with pytest.raises(ValueError, match="propagation"):
        client().delete_job("vision", "gpujob-1", propagation="Orphan")


def test_pod_log_asks_for_the_tail_of_a_container():
    response = FakeResponse([])
    response.data = b"line 1\nline 2\n"
    kube = client(response)

    text = kube.pod_log("vision", "gpujob-1-x", container="main", tail_lines=2)

    assert text == "line 1\nline 2\n"
    (_, path, kwargs) = kube.api.calls[0]
    assert path == "/api/v1/namespaces/vision/pods/gpujob-1-x/log"
    assert ("tailLines", "2") in kwargs["query_params"]
    assert ("container", "main") in kwargs["query_params"]
    assert kube.reads == 1
