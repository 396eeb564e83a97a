"""The sessions' side of the watcher process (``manage.py watch_jobs`` runs every app's): follows
every cluster's session Jobs and pods (the portal's session labels) and writes each session's
state within seconds: starting, running with its server's address, stopped or failed.

A session's run is one Job and one pod, and a portal runs a few hundred sessions at most, so the
watch keeps every object it sees and, after each moment's changes, writes every active session
of the cluster from them (``tracker.record_cluster``); the periodic ``resync_sessions`` does the
same from full lists. Clusters are found as the jobs' watcher finds them.
"""

from __future__ import annotations

import functools
import logging

from django.db import close_old_connections, connection
from django.db.utils import Error as DatabaseError

from clusters import following
from clusters.following import RETRY_MIN_SECONDS
from clusters.kube import KubeError
from interactive import tracker
from workloads import watcher as workload_watcher
from workloads.pod_states import metadata_of

logger = logging.getLogger(__name__)


class SessionWatch(following.WorkloadWatch):
    thread_prefix = "sessions-"
    what = "interactive sessions"

    def kinds(self) -> tuple[str, ...]:
        return tracker.KINDS

    def object_selectors(self, kind: str) -> dict:
        return tracker.object_selectors(kind)

    def _apply(self) -> None:
        held: dict[str, dict[str, dict]] = {kind: {} for kind in tracker.KINDS}
        listed: set[str] = set()
        owed = False
        try:
            while not self.stopping():
                for change in self.gathered(owed=owed):
                    objects = held[change.kind]
                    if change.type == "LIST":
                        objects.clear()
                        for item in change.items or []:
                            objects[metadata_of(item).get("name", "")] = item
                        listed.add(change.kind)
                    else:
                        name = metadata_of(change.object or {}).get("name", "")
                        if change.type == "DELETED":
                            objects.pop(name, None)
                        else:
                            objects[name] = change.object or {}
                    owed = True
                if self.stopping():
                    break
                if owed and listed >= set(tracker.KINDS):
                    owed = self._flush(held)
        finally:
            connection.close()

    def _flush(self, held: dict[str, dict[str, dict]]) -> bool:
        """Write the cluster's active sessions; whether a write is still owed (it failed)."""
        try:
            close_old_connections()
            tracker.record_cluster(
                self.cluster_id, dict(held["Job"]), tracker.pods_by_job(held["Pod"].values())
            )
            return False
        except DatabaseError:
            logger.exception("cluster %s: writing sessions failed; trying again", self.cluster_name)
            connection.close()
        except KubeError as error:
            logger.warning("cluster %s: %s", self.cluster_name, error)
        except Exception:
            logger.exception("cluster %s: writing sessions failed", self.cluster_name)
        self.stop.wait(RETRY_MIN_SECONDS)
        return True


run = functools.partial(
    workload_watcher.run, watch_class=SessionWatch, resync=tracker.resync_cluster
)
