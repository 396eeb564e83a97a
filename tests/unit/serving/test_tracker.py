"""The services watcher's view of a cluster: a revision's objects keyed by (namespace, service
id, revision number), kept from lists and watch events. No database."""

from clusters.vocabulary import REVISION_LABEL, SERVICE_ID_LABEL
from serving.tracker import ClusterState

KEY = ("vision", 3, 1)


def replica(name: str) -> dict:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "vision",
            "labels": {SERVICE_ID_LABEL: "3", REVISION_LABEL: "1"},
        },
        "status": {"phase": "Running"},
    }


def test_a_deleted_replica_is_forgotten_and_the_revision_with_its_last_one():
    state = ClusterState()
    state.apply("Pod", "ADDED", replica("llm-r1-a"))
    state.apply("Pod", "ADDED", replica("llm-r1-b"))

    assert state.apply("Pod", "DELETED", replica("llm-r1-a")) == KEY
    assert list(state.pods[KEY]) == ["llm-r1-b"]

    state.apply("Pod", "DELETED", replica("llm-r1-b"))
    assert KEY not in state.pods
    assert state.keys() == set()


def test_a_modified_replica_replaces_what_was_known_of_it():
    state = ClusterState()
    state.apply("Pod", "ADDED", replica("llm-r1-a"))
    finished = replica("llm-r1-a")
    finished["status"]["phase"] = "Succeeded"

    state.apply("Pod", "MODIFIED", finished)

    assert state.pods[KEY] == {"llm-r1-a": finished}
