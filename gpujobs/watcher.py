"""The watcher: follows every cluster's Jobs, Pods and Job events that carry the portal's labels
(and, on a cluster whose quota Kueue enforces, the Jobs' Kueue Workloads) and writes each job's
state back as it changes (``manage.py watch_jobs``).

Per cluster, three threads each list one kind (a full resync) and then watch it from the list's
resourceVersion; when a watch ends (the API server closes it every few minutes, or the
connection drops) it resumes from the last resourceVersion it saw (bookmarks keep that fresh),
and when the API server answers 410 Gone (the version is too old) it lists again. One more
thread per cluster owns the cluster's state (``tracker.Tracker``): it takes the changes off a
queue, in order, and writes the jobs they touch; a job whose write failed (the database away)
is written again shortly after.

On a Kueue cluster one more thread reads Kueue's queues every few seconds (``gpujobs.queues``:
the portal's ClusterQueues' quota and usage, and the pending workloads' positions from Kueue's
visibility API) into the cluster's ``QueueSnapshot``, which explains waiting jobs.

Clusters are found in the database every few seconds, so a cluster added, removed, given a new
kubeconfig or switched between quota modes is picked up without a restart (a switch starts the
cluster's watches afresh: a full list then finds the Jobs that wait under the mode it left).
"""

from __future__ import annotations

import functools
import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.utils import Error as DatabaseError

from clusters import following
from clusters.following import RETRY_MIN_SECONDS
from clusters.kube import KubeError
from clusters.models import Cluster, QuotaMode
from gpujobs import queues
from gpujobs import tracker as tracking
from workloads import watcher as workload_watcher

logger = logging.getLogger(__name__)

# The least time between two writes of job states: the changes that come meanwhile (a job's pod
# scheduled, started and ready; many jobs at once) are written together, in one flush. What the
# pages show lags the cluster by this much more at most.
FLUSH_EVERY_SECONDS = 0.1


class ClusterWatch(following.WorkloadWatch):
    """The threads that follow one cluster's jobs (and, with Kueue, read its queues)."""

    what = "GPU jobs"

    def __init__(self, cluster: Cluster, *, stop: threading.Event, watch_timeout: int, **options):
        self.cluster = cluster
        self.kueue = cluster.quota_mode == QuotaMode.KUEUE
        super().__init__(cluster, stop=stop, watch_timeout=watch_timeout, **options)
        self.tracker = tracking.Tracker(
            cluster_id=cluster.pk, cluster_name=cluster.name, kueue=self.kueue
        )

    def kinds(self) -> tuple[str, ...]:
        return tracking.KINDS + (tracking.KUEUE_KINDS if self.kueue else ())

    def object_selectors(self, kind: str) -> dict:
        return tracking.object_selectors(kind)

    def kept(self, kind: str):
        return functools.partial(tracking.kept, kind)

    def extra_threads(self) -> list[threading.Thread]:
        if not self.kueue:
            return []
        name = f"queues-{self.cluster_name}"
        return [threading.Thread(target=self._queues, name=name, daemon=True)]

    # -- Kueue's queues, read every few seconds

    def _queues(self) -> None:
        every = settings.GPUJOBS_QUEUE_POLL_SECONDS
        try:
            while not self.stopping():
                try:
                    close_old_connections()
                    fields = queues.take_snapshot(
                        self.cluster, kube=self.kube, portal_name=settings.PORTAL_NAME
                    )
                    if self.stopping():
                        return  # no write once this process no longer leads
                    queues.record_snapshot(self.cluster_id, fields)
                except KubeError as error:
                    logger.warning("cluster %s: Kueue's queues: %s", self.cluster_name, error)
                except DatabaseError:
                    logger.exception("cluster %s: writing the queue snapshot", self.cluster_name)
                    connection.close()
                except Exception:
                    logger.exception("cluster %s: reading Kueue's queues failed", self.cluster_name)
                self.stop.wait(every)
                if self.parent_stop.is_set():
                    return
        finally:
            connection.close()

    # -- applying changes, one thread per cluster

    def _apply(self) -> None:
        state = self.tracker.state
        dirty: set[tracking.Key] = set()
        deleted: dict[tracking.Key, str] = {}
        pending_lists: dict[str, object] = {}
        last_flush = 0.0
        try:
            while not self.stopping():
                gathered = self.gathered(
                    owed=bool(dirty or deleted), until=last_flush + FLUSH_EVERY_SECONDS
                )
                for change in gathered:
                    if change.type == "LIST":
                        dirty |= state.replace(change.kind, change.items or [])
                        if change.kind == "Job":
                            pending_lists["Job"] = change.listed_at
                    else:
                        uid = tracking.job_uid_of(change.kind, change.object or {})
                        key = state.apply(change.kind, change.type, change.object or {})
                        if key is not None:
                            if change.kind == "Job" and change.type == "DELETED":
                                deleted[key] = uid
                                dirty.discard(key)
                            else:
                                dirty.add(key)
                if self.stopping():
                    return  # no write once this process no longer leads
                self._flush(dirty, deleted, pending_lists)
                last_flush = time.monotonic()
        finally:
            connection.close()

    def _flush(self, dirty: set, deleted: dict, pending_lists: dict) -> None:
        try:
            close_old_connections()
            if dirty:
                batch = sorted(dirty)
                self.tracker.write_many(batch)
                dirty.difference_update(batch)
            for key in sorted(deleted):
                self.tracker.job_deleted(key, deleted[key])
                del deleted[key]
            if "Job" in pending_lists:
                listed_at = pending_lists.pop("Job")
                for key in self.tracker.missing_jobs(listed_at=listed_at, kube=self.kube):
                    self.tracker.job_deleted(key, "")
        except DatabaseError:
            logger.exception(
                "cluster %s: writing job states failed; trying again", self.cluster_name
            )
            connection.close()
            self.stop.wait(RETRY_MIN_SECONDS)
        except KubeError as error:
            # Only the check for Jobs deleted while nobody watched reads the cluster here; the
            # periodic resync makes that check again.
            logger.warning("cluster %s: %s", self.cluster_name, error)
        except Exception:
            logger.exception("cluster %s: writing job states failed", self.cluster_name)
            self.stop.wait(RETRY_MIN_SECONDS)


# Follow every reachable cluster's jobs until ``stop`` is set (with ``once``, one full pass over
# each): ``workloads.watcher.run`` with this app's watch and resync.
run = functools.partial(
    workload_watcher.run, watch_class=ClusterWatch, resync=tracking.resync_cluster
)
