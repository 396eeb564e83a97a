"""The loop every workload's watcher runs (``gpujobs.watcher``, ``serving.watcher``): find the
clusters in the database every few seconds, so that a cluster added, removed, given a new
kubeconfig or switched between quota modes is picked up without a restart; with leader election,
follow only the clusters this process leads; start a watch per cluster and close it when the
cluster goes or changes hands.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.utils import Error as DatabaseError

from clusters import following
from clusters.following import RETRY_MAX_SECONDS
from clusters.kube import KubeError, connection_configured
from clusters.models import Cluster
from workloads import leader_election

logger = logging.getLogger(__name__)


def _cluster_key(cluster: Cluster) -> tuple:
    return (
        cluster.pk,
        cluster.name,
        cluster.kubeconfig_path,
        cluster.api_server_url,
        cluster.quota_mode,
    )


def run(
    *,
    stop: threading.Event,
    discover_every: float = 5.0,
    watch_timeout: int = 240,
    once: bool = False,
    watch_class: type[following.WorkloadWatch],
    resync: Callable[[Cluster], dict],
) -> dict[tuple, following.WorkloadWatch]:
    """Follow every reachable cluster until ``stop`` is set, with a ``watch_class`` per
    cluster (started and closed as clusters come, go and change hands); with ``once``, make
    one full pass over each cluster with ``resync`` (no watch) and return."""
    if once:
        for cluster in Cluster.objects.all():
            if connection_configured(cluster):
                try:
                    result = resync(cluster)
                    logger.info("cluster %s: %s", cluster.name, result)
                except KubeError as error:
                    logger.warning("cluster %s: %s", cluster.name, error)
        return {}
    elect = settings.GPUJOBS_WATCHER_LEADER_ELECTION
    watches: dict[tuple, following.WorkloadWatch] = {}
    candidates: dict[tuple, leader_election.Candidate] = {}
    retry_at: dict[tuple, float] = {}  # clusters whose credentials failed: when to try again
    try:
        while not stop.is_set():
            try:
                close_old_connections()
                clusters = {
                    _cluster_key(c): c for c in Cluster.objects.all() if connection_configured(c)
                }
            except DatabaseError:
                logger.exception("cannot read the clusters; trying again")
                connection.close()
                stop.wait(discover_every)
                continue
            for key in list(watches):
                if key not in clusters:
                    logger.info("no longer watching cluster %s", watches[key].cluster_name)
                    watches.pop(key).close()
                elif not watches[key].leading():
                    logger.info("cluster %s: not the leader; watching stops", key[1])
                    watches.pop(key).close()
            reached = {leader_election.key_of(c) for c in clusters.values()}
            for ckey in list(candidates):
                if ckey not in reached:
                    leader_election.leave(candidates.pop(ckey))
            for key, cluster in clusters.items():
                if key in watches or retry_at.get(key, 0) > time.monotonic():
                    continue
                ckey = leader_election.key_of(cluster)
                try:
                    if elect and ckey not in candidates:
                        candidates[ckey] = leader_election.join(cluster)
                    leading = _leadership(candidates.get(ckey))
                    if not leading():
                        continue  # another replica follows this cluster
                    watch = watch_class(
                        cluster, stop=stop, watch_timeout=watch_timeout, leading=leading
                    )
                except KubeError as error:
                    logger.warning("cannot watch cluster %s: %s", cluster.name, error)
                    retry_at[key] = time.monotonic() + RETRY_MAX_SECONDS
                    continue
                watch.start()
                watches[key] = watch
            _wait(
                stop,
                discover_every,
                functools.partial(
                    _leadership_changed, clusters, candidates, watches, retry_at=retry_at
                ),
            )
    finally:
        for watch in watches.values():
            watch.close()
        if candidates:
            # The Leases are given up only once the watches have stopped writing.
            for watch in watches.values():
                watch.join(timeout=2.0)
            for candidate in candidates.values():
                leader_election.leave(candidate)
    time.sleep(0.1)
    return watches


def _leadership(candidate: leader_election.Candidate | None):
    """Whether this process may follow the cluster: always without leader election; with it,
    while it leads in the term it leads now (a watch started in an earlier term stops, and
    the next one begins with a full list)."""
    if candidate is None:
        return lambda: True
    term = candidate.term
    return lambda: candidate.term == term and candidate.leading()


def _leadership_changed(clusters: dict, candidates: dict, watches: dict, *, retry_at: dict) -> bool:
    """A cluster this process began or stopped leading since its watches were last settled
    (but for one whose watch waits to be tried again)."""
    now = time.monotonic()
    for key, cluster in clusters.items():
        candidate = candidates.get(leader_election.key_of(cluster))
        if candidate is None or retry_at.get(key, 0) > now:
            continue
        if candidate.leading() != (key in watches and watches[key].leading()):
            return True
    return False


def _wait(stop: threading.Event, seconds: float, changed) -> None:
    """Wait ``seconds`` or until ``stop``, looking every half second whether leadership
    changed, so that a new leader starts its watches at once."""
    deadline = time.monotonic() + seconds
    while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
        if stop.wait(min(0.5, left)):
            return
        if changed():
            return
