"""Leader election for the watcher (``manage.py watch_jobs``), so that it can run as several
replicas: per cluster, one process holds a ``coordination.k8s.io`` Lease in the portal's
namespace on that cluster and follows the cluster; the others only try to take the Lease.

The rules (as Kubernetes' own controllers elect a leader):

- The holder renews the Lease every ``renew_seconds``. It counts itself leader only until
  ``renewed_at + renew_deadline``, where ``renewed_at`` is when the last successful renewal
  *started* (by this process's monotonic clock) and ``renew_deadline = lease_seconds -
  renew_seconds``; so a holder that cannot renew stops writing a whole ``renew_seconds`` before
  any other process may take the Lease.
- Another process takes the Lease only when it has seen the Lease unchanged (the same
  resourceVersion) for ``lease_seconds`` by its own clock: no two machines' clocks are compared.
- Every write is conditional on the resourceVersion read (``clusters.leases``): of two
  processes taking the Lease at once, one gets a conflict and stays a candidate.

``decide`` and ``leading`` are pure and take the clock as a value; ``Candidate`` runs them
against the cluster, one thread per cluster, shared by every watcher loop of the process
(``join`` / ``leave``). Each time a process becomes leader its ``term`` grows, and the watcher
starts the cluster's watches afresh: they begin with a full list (a resync), so nothing that
happened while another process led, or nobody did, is missed.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from clusters.kube import AlreadyExists, Conflict, KubeError
from clusters.leases import LeaseClient, LeaseRecord, lease_body, micro_time
from clusters.vocabulary import MANAGED_BY_LABEL

logger = logging.getLogger(__name__)


class Action(enum.StrEnum):
    CREATE = "create"  # no Lease yet
    RENEW = "renew"  # this process holds it
    TAKE_OVER = "take over"  # released, or its holder let it expire
    WAIT = "wait"  # another process holds it


@dataclass(frozen=True)
class Seen:
    """The Lease's resourceVersion, and when (this process's monotonic clock) it first saw it."""

    version: str
    at: float


def observe(previous: Seen | None, record: LeaseRecord | None, *, now: float) -> Seen | None:
    """What this process has seen of the Lease after reading ``record`` at ``now``: a version
    seen before keeps the time it was first seen."""
    if record is None:
        return None
    if previous is not None and previous.version == record.resource_version:
        return previous
    return Seen(record.resource_version, now)


def decide(*, me: str, record: LeaseRecord | None, seen: Seen | None, now: float) -> Action:
    """What a candidate called ``me`` does with the Lease as read (``record``), having seen its
    version since ``seen.at``, at ``now``."""
    if record is None:
        return Action.CREATE
    if record.holder == me:
        return Action.RENEW
    if not record.holder:
        return Action.TAKE_OVER
    unchanged_since = seen.at if seen and seen.version == record.resource_version else None
    if unchanged_since is not None and now >= unchanged_since + record.duration_seconds:
        return Action.TAKE_OVER
    return Action.WAIT


def leading(*, renewed_at: float | None, now: float, renew_deadline: float) -> bool:
    """Whether a holder whose last successful renewal started at ``renewed_at`` may still act
    as leader at ``now``."""
    return renewed_at is not None and now < renewed_at + renew_deadline


def renew_deadline(*, lease_seconds: float, renew_seconds: float) -> float:
    """How long after a renewal started its holder may act: the Lease's duration less one
    renewal interval, which is the margin for a write already under way when it stops."""
    if renew_seconds <= 0 or lease_seconds <= renew_seconds:
        raise ValueError(
            f"the renewal interval ({renew_seconds} s) must be positive and shorter than the "
            f"lease ({lease_seconds} s)"
        )
    return lease_seconds - renew_seconds


def identity() -> str:
    """This process among the replicas: its host name and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


def lease_name(cluster_name: str) -> str:
    return f"{settings.GPUJOBS_WATCHER_LEASE_NAME}-{cluster_name}"


class Candidate:
    """This process's candidacy for one cluster's Lease: ``step`` reads the Lease and acts on
    ``decide``; ``run`` steps every ``renew_seconds`` until stopped."""

    def __init__(
        self,
        leases: LeaseClient,
        *,
        namespace: str,
        name: str,
        me: str,
        lease_seconds: int,
        renew_seconds: float,
        labels: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.leases = leases
        self.namespace = namespace
        self.name = name
        self.me = me
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.deadline = renew_deadline(lease_seconds=lease_seconds, renew_seconds=renew_seconds)
        self.labels = labels or {}
        self.clock = clock
        self.term = 0  # grows each time this process becomes leader
        self.stop = threading.Event()
        self._renewed_at: float | None = None
        self._seen: Seen | None = None
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def leading(self) -> bool:
        with self._lock:
            renewed_at = self._renewed_at
        return leading(renewed_at=renewed_at, now=self.clock(), renew_deadline=self.deadline)

    def step(self) -> bool:
        """One round: read the Lease and create, renew or take it over when ``decide`` says so.
        Returns whether this process leads afterwards."""
        started = self.clock()
        what = f"Lease {self.namespace}/{self.name} on cluster {self.leases.cluster_name}"
        try:
            record = self.leases.read_lease(self.namespace, self.name)
        except KubeError as error:
            logger.warning("%s: %s", what, error)
            return self.leading()
        self._seen = observe(self._seen, record, now=started)
        action = decide(me=self.me, record=record, seen=self._seen, now=started)
        if action is Action.WAIT:
            self._step_down(what, holder=record.holder if record else "")
            return False
        now = micro_time(timezone.now())
        body = lease_body(
            namespace=self.namespace,
            name=self.name,
            holder=self.me,
            duration_seconds=self.lease_seconds,
            transitions=(record.transitions if record else 0)
            + (1 if action is Action.TAKE_OVER else 0),
            acquired_at=(record.acquired_at or now) if action is Action.RENEW else now,
            renewed_at=now,
            labels=self.labels,
            resource_version=record.resource_version if record else "",
        )
        try:
            if action is Action.CREATE:
                written = self.leases.create_lease(body)
            else:
                written = self.leases.update_lease(body)
        except (AlreadyExists, Conflict):
            # Another process wrote the Lease since it was read: it leads (or may), not this one.
            self._step_down(what, holder="another process")
            return False
        except KubeError as error:
            # Still leader until the deadline, if it was: the next step may renew in time.
            logger.warning("%s: %s", what, error)
            return self.leading()
        with self._lock:
            # A new term before the renewal counts, so that no watch starts in the old one.
            was_leading = leading(
                renewed_at=self._renewed_at, now=self.clock(), renew_deadline=self.deadline
            )
            if not was_leading:
                self.term += 1
            self._renewed_at = started
        self._seen = observe(None, written, now=self.clock())
        if not was_leading:
            logger.info("%s: %s leads (%s)", what, self.me, action)
        return True

    def _step_down(self, what: str, *, holder: str) -> None:
        with self._lock:
            was = self._renewed_at is not None
            self._renewed_at = None
        if was:
            logger.warning("%s: %s no longer leads; %s holds it", what, self.me, holder)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.step()
            except Exception:
                logger.exception("Lease %s/%s: the election step failed", self.namespace, self.name)
            self.stop.wait(self.renew_seconds)
        self.release()

    def release(self) -> None:
        """Stop leading and, if this process still holds the Lease, give it up (an empty
        holder), so that another replica takes it at once instead of after its duration. Called
        once the watches have stopped writing (a stopping watcher: a rolling update)."""
        was_leading = self.leading()
        with self._lock:
            self._renewed_at = None
        if not was_leading:
            return
        try:
            record = self.leases.read_lease(self.namespace, self.name)
            if record is None or record.holder != self.me:
                return
            now = micro_time(timezone.now())
            self.leases.update_lease(
                lease_body(
                    namespace=self.namespace,
                    name=self.name,
                    holder="",
                    duration_seconds=self.lease_seconds,
                    transitions=record.transitions,
                    acquired_at=record.acquired_at or now,
                    renewed_at=now,
                    labels=self.labels,
                    resource_version=record.resource_version,
                )
            )
            logger.info("Lease %s/%s: %s gave it up", self.namespace, self.name, self.me)
        except KubeError as error:
            logger.warning(
                "Lease %s/%s: not given up (%s); it expires", self.namespace, self.name, error
            )


# --- one candidacy per cluster and process, shared by the process's watcher loops ----------------

_candidates: dict[tuple, tuple[Candidate, int]] = {}
_candidates_lock = threading.Lock()


def key_of(cluster) -> tuple:
    """What makes one candidacy: the cluster and how it is reached."""
    return (cluster.pk, cluster.name, cluster.kubeconfig_path, cluster.api_server_url)


def join(cluster) -> Candidate:
    """This process's candidacy for ``cluster``'s Lease, started on the first call (each call
    must be paired with a ``leave``). Raises ``KubeError`` when the cluster has no usable
    credentials."""
    key = key_of(cluster)
    with _candidates_lock:
        if key in _candidates:
            candidate, users = _candidates[key]
            _candidates[key] = (candidate, users + 1)
            return candidate
        candidate = Candidate(
            LeaseClient.for_cluster(cluster),
            namespace=settings.PORTAL_NAMESPACE,
            name=lease_name(cluster.name),
            me=identity(),
            lease_seconds=settings.GPUJOBS_WATCHER_LEASE_SECONDS,
            renew_seconds=settings.GPUJOBS_WATCHER_RENEW_SECONDS,
            labels={MANAGED_BY_LABEL: settings.PORTAL_NAME},
        )
        _candidates[key] = (candidate, 1)
        candidate.thread = threading.Thread(
            target=candidate.run, name=f"lease-{cluster.name}", daemon=True
        )
    candidate.thread.start()
    return candidate


def leave(candidate: Candidate, *, wait: float = 5.0) -> None:
    """The end of one ``join``: the last one stops the candidacy and gives up the Lease if it
    held it (waiting up to ``wait`` seconds for that), and another replica takes it."""
    last = False
    with _candidates_lock:
        for key, (held, users) in list(_candidates.items()):
            if held is candidate:
                if users > 1:
                    _candidates[key] = (held, users - 1)
                else:
                    del _candidates[key]
                    last = True
                break
    if last:
        candidate.stop.set()
        if candidate.thread is not None:
            candidate.thread.join(timeout=wait)
