"""The services' side of the watcher process (``manage.py watch_jobs`` runs it beside the jobs'):
follows every cluster's Deployments, ReplicaSets and pods that carry the portal's service
labels and writes each revision's replicas and state back within seconds.

Per cluster, one thread per kind lists it and then watches it from the list's resourceVersion,
resuming after a watch ends and listing again after 410 Gone (``clusters.following``: the
threads and the loop the jobs' watcher uses); one more thread owns the cluster's state
(``tracker.Tracker``), takes the changes off a queue in order and writes the revisions they
touch. Nothing is lost across a
restart: a watcher that starts lists everything, and once every kind is listed it writes every
revision the portal follows there, those whose objects are gone included; the periodic
``resync_services`` does the same without a watch. Clusters are found as the jobs' watcher
finds them (``workloads.watcher.run``, given this watch class and resync).
"""

from __future__ import annotations

import functools
import logging
import threading

from django.db import close_old_connections, connection
from django.db.utils import Error as DatabaseError

from clusters import following
from clusters.following import RETRY_MIN_SECONDS
from clusters.kube import KubeError
from clusters.models import Cluster
from serving import tracker as tracking
from workloads import watcher as workload_watcher

logger = logging.getLogger(__name__)


class ServiceWatch(following.WorkloadWatch):
    """The threads that follow one cluster's services."""

    thread_prefix = "services-"
    what = "inference services"

    def __init__(self, cluster: Cluster, *, stop: threading.Event, watch_timeout: int, **options):
        super().__init__(cluster, stop=stop, watch_timeout=watch_timeout, **options)
        self.tracker = tracking.Tracker(cluster_id=cluster.pk, cluster_name=cluster.name)

    def kinds(self) -> tuple[str, ...]:
        return tracking.KINDS

    def object_selectors(self, kind: str) -> dict:
        return tracking.object_selectors(kind)

    def _apply(self) -> None:
        state = self.tracker.state
        dirty: set[tracking.Key] = set()
        listed: set[str] = set()
        write_all = False
        try:
            while not self.stopping():
                for change in self.gathered(owed=bool(dirty or write_all)):
                    if change.type == "LIST":
                        dirty |= state.replace(change.kind, change.items or [])
                        listed.add(change.kind)
                        # Every kind listed (again): revisions gone meanwhile are written too.
                        write_all = write_all or listed >= set(tracking.KINDS)
                    else:
                        key = state.apply(change.kind, change.type, change.object or {})
                        if key is not None:
                            dirty.add(key)
                if self.stopping():
                    break  # no write once this process no longer leads
                if listed >= set(tracking.KINDS):
                    write_all = self._flush(dirty, write_all=write_all)
        finally:
            connection.close()

    def _flush(self, dirty: set, *, write_all: bool) -> bool:
        """Write the dirty revisions (all of them after a full list); whether a full write is
        still owed (it failed)."""
        try:
            close_old_connections()
            if write_all:
                self.tracker.write_all()
            elif dirty:
                self.tracker.write_many(sorted(dirty))
            dirty.clear()
            return False
        except DatabaseError:
            logger.exception(
                "cluster %s: writing service states failed; trying again", self.cluster_name
            )
            connection.close()
        except KubeError as error:
            logger.warning("cluster %s: %s", self.cluster_name, error)
        except Exception:
            logger.exception("cluster %s: writing service states failed", self.cluster_name)
        self.stop.wait(RETRY_MIN_SECONDS)
        return write_all


# Follow every reachable cluster's services until ``stop`` is set (with ``once``, one full pass
# over each): ``workloads.watcher.run`` with this app's watch and resync.
run = functools.partial(
    workload_watcher.run, watch_class=ServiceWatch, resync=tracking.resync_cluster
)
