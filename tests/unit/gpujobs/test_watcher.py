"""The watcher's loop for one kind: list, watch from the list's resourceVersion, resume from the
last version seen when a watch ends, and list again (a full resync) on 410 Gone."""

import queue
import threading
import time

from clusters.kube import ClusterUnreachable, ResourceVersionExpired
from clusters.workloads import Listing, WatchEvent
from gpujobs import watcher


class ScriptedKube:
    """Answers lists and watches from a script; stops the watcher when the script runs out.

    A stand-in, because what is tested is the order of the loop's calls and the versions they
    resume from, after endings the real API server cannot be made to give on cue: a watch cut
    short right after a bookmark, a 410 Gone, a connection lost mid-watch. The watcher process
    follows the devcluster for real in tests/integration/gpujobs (its watches restart every 30 s
    there, resuming from their last version)."""

    def __init__(self, stop, lists, watches):
        self.stop = stop
        self.lists = list(lists)
        self.watches = list(watches)
        self.calls = []

    def list_objects(self, kind, **selectors):
        self.calls.append(("list", kind, selectors))
        return self.lists.pop(0)

    def watch(self, kind, *, resource_version, **kwargs):
        self.calls.append(("watch", kind, resource_version))
        if not self.watches:
            self.stop.set()
            return
        script = self.watches.pop(0)
        for item in script:
            if isinstance(item, Exception):
                raise item
            yield item


def pod(name, version):
    return {"metadata": {"name": name, "resourceVersion": version}}


def follow(lists, watches) -> tuple[watcher.ClusterWatch, ScriptedKube]:
    stop = threading.Event()
    watch = watcher.ClusterWatch.__new__(watcher.ClusterWatch)
    watch.cluster_id, watch.cluster_name = 1, "gpu-east"
    watch.stop, watch.parent_stop = threading.Event(), stop
    watch.watch_timeout = 5
    watch.changes = queue.Queue()
    watch.lists = watch.resumes = 0
    watch.leading = lambda: True
    watch.kube = ScriptedKube(stop, lists, watches)
    watch._follow("Pod")
    return watch, watch.kube


def drained(watch) -> list:
    changes = []
    while not watch.changes.empty():
        changes.append(watch.changes.get())
    return changes


def test_lists_then_watches_from_the_lists_version_and_resumes_from_the_last_seen():
    watch, kube = follow(
        lists=[Listing(items=[pod("a", "10")], resource_version="10")],
        watches=[
            [WatchEvent("MODIFIED", pod("a", "12")), WatchEvent("BOOKMARK", pod("", "15"))],
            [WatchEvent("ADDED", pod("b", "16"))],
        ],
    )

    assert [c for c in kube.calls if c[0] == "watch"] == [
        ("watch", "Pod", "10"),
        ("watch", "Pod", "15"),  # resumed after the bookmark, no new list
        ("watch", "Pod", "16"),
    ]
    assert watch.lists == 1
    assert [(c.type, (c.object or {}).get("metadata", {}).get("name")) for c in drained(watch)] == [
        ("LIST", None),
        ("MODIFIED", "a"),
        ("ADDED", "b"),  # bookmarks are not changes
    ]


def test_410_gone_falls_back_to_a_full_list():
    watch, kube = follow(
        lists=[
            Listing(items=[], resource_version="10"),
            Listing(items=[pod("a", "90")], resource_version="90"),
        ],
        watches=[[ResourceVersionExpired("too old resource version")], []],
    )

    assert [c[0] for c in kube.calls] == ["list", "watch", "list", "watch", "watch"]
    assert kube.calls[3] == ("watch", "Pod", "90")
    assert watch.lists == 2
    lists = [c for c in drained(watch) if c.type == "LIST"]
    assert [len(c.items) for c in lists] == [0, 1]


def test_unreachable_cluster_resumes_from_the_same_version_after_a_pause(monkeypatch):
    monkeypatch.setattr(watcher, "RETRY_MIN_SECONDS", 0.01)
    watch, kube = follow(
        lists=[Listing(items=[], resource_version="10")],
        watches=[[ClusterUnreachable("connection refused")], []],
    )

    assert [c for c in kube.calls if c[0] == "watch"][:2] == [
        ("watch", "Pod", "10"),
        ("watch", "Pod", "10"),
    ]
    assert watch.lists == 1


def test_events_are_chosen_by_field_and_jobs_and_pods_by_label():
    assert watcher.tracking.object_selectors("Event") == {
        "field_selector": "involvedObject.kind=Job,reason=FailedCreate"
    }
    assert watcher.tracking.object_selectors("Pod") == {
        "label_selector": "app.kubernetes.io/managed-by=gpu-portal,gpuportal.io/job-id"
    }


# --- changes close together are written together -------------------------------------------------


def changes_of(*items) -> watcher.ClusterWatch:
    watch = watcher.ClusterWatch.__new__(watcher.ClusterWatch)
    watch.changes = queue.Queue()
    for item in items:
        watch.changes.put(item)
    return watch


def test_the_changes_waiting_are_taken_together_even_past_the_window():
    watch = changes_of("pod scheduled", "pod running")

    gathered = watch.gathered(owed=False, until=time.monotonic() - 1)

    assert list(gathered) == ["pod scheduled", "pod running"]


def test_nothing_waiting_gathers_nothing():
    assert list(changes_of().gathered(owed=True, until=time.monotonic() + 5)) == []


def test_within_the_window_a_change_on_its_way_joins_the_same_write():
    watch = changes_of("pod scheduled")
    gathered = watch.gathered(owed=False, until=time.monotonic() + 5)
    assert next(gathered) == "pod scheduled"
    later = threading.Timer(0.05, lambda: watch.changes.put("pod running"))
    later.start()

    assert next(gathered) == "pod running"
    later.join()


def test_past_the_window_a_change_on_its_way_waits_for_the_next_write():
    watch = changes_of("pod scheduled")
    gathered = watch.gathered(owed=False, until=time.monotonic() - 1)
    assert next(gathered) == "pod scheduled"
    later = threading.Timer(0.05, lambda: watch.changes.put("pod running"))
    later.start()

    assert list(gathered) == []
    later.join()
    assert list(watch.gathered(owed=False)) == ["pod running"]
