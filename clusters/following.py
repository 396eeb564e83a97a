"""Following one kind of object on a cluster, for the watchers of every workload app: list
every object of the kind (a full resync), then watch from the list's resourceVersion; when a
watch ends (the API server closes it every few minutes, or the connection drops) resume from the
last resourceVersion seen (bookmarks keep it fresh), and when the API server answers 410 Gone
(the version is too old) list again. What was seen goes onto a queue as ``Change``s, in order,
for the one thread that owns the cluster's state.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

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
    ``stop``. ``keep``: what of each listed object goes on ``changes`` (the whole object without
    it), taken page by page as the list arrives."""
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
                    changes.put(Change(kind, event.type, object=event.object))
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
