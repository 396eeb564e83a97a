"""Following one kind of object on a cluster, for the watchers of every workload app: list
every object of the kind (a full resync), then watch from the list's resourceVersion; when a
watch ends (the API server closes it every few minutes, or the connection drops) resume from the
last resourceVersion seen (bookmarks keep it fresh), and when the API server answers 410 Gone
(the version is too old) list again. What was seen goes onto a queue as ``Change``s, in order,
for the one thread that owns the cluster's state. ``WorkloadWatch`` is those threads for one
cluster; each workload app's watcher subclasses it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from django.utils import timezone

from clusters.kube import KubeError, ResourceVersionExpired
from clusters.workloads import WorkloadClient

logger = logging.getLogger(__name__)

RETRY_MIN_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0


@dataclass(frozen=True)
class Change:
    kind: str
    type: str  # ADDED / MODIFIED / DELETED, or LIST for a full list in ``items``
    object: dict | None = None
    items: list | None = None
    listed_at: object = None


def keep_by_name(store: dict[Any, dict[str, dict]], key: Any, event_type: str, obj: dict) -> None:
    """Keep what a watch event (or a full list, as ADDED) says of one object in ``store``,
    among its ``key``'s objects by name: dropped on DELETED (the key too, with its last object),
    else kept as it now is."""
    name = (obj.get("metadata") or {}).get("name") or ""
    if event_type == "DELETED":
        store.get(key, {}).pop(name, None)
        if key in store and not store[key]:
            del store[key]
    else:
        store.setdefault(key, {})[name] = obj


class Counts(Protocol):
    """Where ``follow`` counts its full lists (first ones, and after 410 Gone) and the watches
    it resumed from a resourceVersion."""

    lists: int
    resumes: int


def follow(
    kube: WorkloadClient,
    kind: str,
    *,
    selectors: dict,
    changes: queue.Queue,
    stop: threading.Event,
    stopping: Callable[[], bool],
    watch_timeout: int,
    counts: Counts,
    cluster_name: str,
    keep: Callable[[dict], dict] | None = None,
) -> None:
    """Follow ``kind`` (matching ``selectors``) until ``stopping()``; waits between retries on
    ``stop``. ``keep``: what of each object goes on ``changes`` (the whole object without it),
    taken page by page as a list arrives and event by event as the watch does."""
    version = ""
    delay = RETRY_MIN_SECONDS
    while not stopping():
        try:
            if not version:
                listed_at = timezone.now()
                listing = kube.list_objects(kind, keep=keep, **selectors)
                changes.put(Change(kind, "LIST", items=listing.items, listed_at=listed_at))
                version, listed = listing.resource_version, len(listing.items)
                # The items are the queue's now: not held here for as long as the watch runs.
                del listing
                counts.lists += 1
                logger.info(
                    "cluster %s: listed %d %s(s) at resourceVersion %s",
                    cluster_name,
                    listed,
                    kind,
                    version,
                )
            else:
                counts.resumes += 1
            for event in kube.watch(
                kind,
                resource_version=version,
                timeout_seconds=watch_timeout,
                stop=stop,
                **selectors,
            ):
                if stopping():
                    return
                version = event.resource_version or version
                if event.type != "BOOKMARK":
                    # Trimmed before it queues, as listed objects are: under load thousands of
                    # events wait for ``_apply``, and whole objects made most of the memory.
                    obj = keep(event.object) if keep else event.object
                    changes.put(Change(kind, event.type, object=obj))
            delay = RETRY_MIN_SECONDS
        except ResourceVersionExpired as error:
            logger.info("cluster %s: %s", cluster_name, error)
            version = ""  # list everything again
        except KubeError as error:
            logger.warning("cluster %s: %s watch: %s", cluster_name, kind, error)
            stop.wait(delay)
            delay = min(delay * 2, RETRY_MAX_SECONDS)
        except Exception:
            logger.exception("cluster %s: %s watch failed; listing again", cluster_name, kind)
            version = ""
            stop.wait(delay)
            delay = min(delay * 2, RETRY_MAX_SECONDS)


class WorkloadWatch:
    """The threads that follow one cluster for a workload app: one per kind (``follow``) puts
    what it sees on ``changes``; one more (``_apply``, the app's) owns the cluster's state, takes
    the changes off in order and writes them; ``extra_threads`` may add more. The app's subclass
    names its ``kinds`` and their ``object_selectors``."""

    # Threads are named ``watch-<prefix><cluster>-<kind>`` and ``apply-<prefix><cluster>``.
    thread_prefix = ""
    what = "workloads"  # for the log line that says the watch started

    def __init__(
        self,
        cluster,
        *,
        stop: threading.Event,
        watch_timeout: int,
        leading: Callable[[], bool] | None = None,
    ):
        self.cluster_id = cluster.pk
        self.cluster_name = cluster.name
        self.kube = WorkloadClient.for_cluster(cluster)
        self.stop = threading.Event()
        self.parent_stop = stop
        self.watch_timeout = watch_timeout
        self.changes: queue.Queue[Change] = queue.Queue()
        self.threads: list[threading.Thread] = []
        self.lists = 0  # full lists made (first ones, and after 410 Gone)
        self.resumes = 0  # watches resumed from a resourceVersion
        # Whether this process still leads the cluster's watchers (leader election): once it
        # does not, the threads stop and nothing more is written.
        self.leading = leading or (lambda: True)

    def kinds(self) -> tuple[str, ...]:
        raise NotImplementedError

    def object_selectors(self, kind: str) -> dict:
        raise NotImplementedError

    def kept(self, kind: str) -> Callable[[dict], dict] | None:
        """What of each object of ``kind`` the watch keeps (``follow``'s ``keep``):
        everything unless a subclass trims it to what its observations read."""
        return None

    def extra_threads(self) -> list[threading.Thread]:
        return []

    def stopping(self) -> bool:
        return self.stop.is_set() or self.parent_stop.is_set() or not self.leading()

    def gathered(self, *, owed: bool, until: float = 0.0) -> Iterator[Change]:
        """The changes of one moment, in order, for ``_apply`` to write in one flush: the first
        (waited for half a second while a write is owed, else a second), then those already
        waiting and, up to ``until`` (a monotonic time), those still coming, so a busy moment
        is written in one flush rather than a flush each."""
        try:
            change = self.changes.get(timeout=0.5 if owed else 1.0)
        except queue.Empty:
            return
        while change is not None:
            yield change
            change = self._next_change(until=until)

    def _next_change(self, *, until: float) -> Change | None:
        try:
            return self.changes.get_nowait()
        except queue.Empty:
            wait = until - time.monotonic()
            if wait <= 0:
                return None
        try:
            return self.changes.get(timeout=wait)
        except queue.Empty:
            return None

    def start(self) -> None:
        name = f"{self.thread_prefix}{self.cluster_name}"
        for kind in self.kinds():
            self.threads.append(
                threading.Thread(
                    target=self._follow, args=(kind,), name=f"watch-{name}-{kind}", daemon=True
                )
            )
        self.threads.append(threading.Thread(target=self._apply, name=f"apply-{name}", daemon=True))
        self.threads.extend(self.extra_threads())
        for thread in self.threads:
            thread.start()
        logger.info("watching %s on cluster %s", self.what, self.cluster_name)

    def close(self) -> None:
        self.stop.set()

    def join(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds in all) for the threads to end after ``close``."""
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _follow(self, kind: str) -> None:
        follow(
            self.kube,
            kind,
            selectors=self.object_selectors(kind),
            changes=self.changes,
            stop=self.stop,
            stopping=self.stopping,
            watch_timeout=self.watch_timeout,
            counts=self,
            cluster_name=self.cluster_name,
            keep=self.kept(kind),
        )

    def _apply(self) -> None:
        raise NotImplementedError
