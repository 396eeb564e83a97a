"""What every reconcile pass shares: the team's (``reconcile.team_pass``), the cluster's
(``reconcile.cluster_pass``) and an inference service's (``serving.reconcile``).

A pass's ``Outcome``; ``each``, which makes a pass's independent requests to the cluster at once
on the process's pool; the advisory lock that serialises the passes over one row (``lock``,
``lock_all``: a PostgreSQL advisory lock rather than a row lock, so that approvals updating the
row never wait for a pass talking to a slow cluster); and recording how a pass went on its row
(``record``, ``outcome_fields``), then logging it and raising its error for the task to retry
(``finish``).
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import Case, F, Value, When
from django.utils import timezone

from clusters.kube import KubeError
from tenants.models import ReconcileState

logger = logging.getLogger(__name__)

# Requests of one pass that may be in flight at once (they are independent of each other); the
# process's request pool holds this many for each pass a sweep runs at once.
MAX_CONCURRENT_REQUESTS = 4
# First key of the advisory locks that serialise team passes (the second is the row's id); the
# cluster's and the services' passes give their own.
ADVISORY_LOCK_CLASS = 0x6770  # "gp"


@dataclass
class Outcome:
    """What one pass did: objects applied and deleted, and the requests it made."""

    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    reads: int = 0
    writes: int = 0
    quota: dict = field(default_factory=dict)
    namespace_deleted: bool = False
    # Whether Kueue objects of the portal's are on the cluster after the pass (None: not read).
    queues: bool | None = None

    def as_dict(self) -> dict:
        return {
            "applied": self.applied,
            "deleted": self.deleted,
            "reads": self.reads,
            "writes": self.writes,
        }


def each(function, items: list) -> list:
    """``function`` over independent requests at once: a pass costs about as long as its
    slowest request rather than their sum. The first error is raised (after all finished).

    The requests run on one pool per process, kept for its life: a sweep makes thousands of
    passes, and starting threads for each cost more than its requests' own work. ``function``
    must not itself call ``each`` (it would wait on the pool it runs in)."""
    if len(items) <= 1:
        return [function(item) for item in items]
    return list(_request_pool().map(function, items))


def each_started(function, items: list):
    """``each`` started now and waited for later: the requests run while the caller does other
    work (the API server answering while the caller builds what to compare them with). Returns
    a callable that waits for them all and gives their results in order, or raises the first
    error. The same rule as ``each``: ``function`` must not call ``each``."""
    futures = [_request_pool().submit(function, item) for item in items]

    def results() -> list:
        wait(futures)
        return [future.result() for future in futures]

    return results


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _request_pool() -> ThreadPoolExecutor:
    """This process's pool (a forked worker child makes its own: threads do not survive a
    fork). Sized for a sweep's passes side by side, each with a few requests in flight."""
    pid = os.getpid()
    with _pools_lock:
        pool = _pools.get(pid)
        if pool is None:
            workers = MAX_CONCURRENT_REQUESTS * max(1, settings.PORTAL_RECONCILE_SWEEP_CONCURRENCY)
            pool = _pools[pid] = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="reconcile-request"
            )
        return pool


def lock(row_id: int, *, lock_class: int = ADVISORY_LOCK_CLASS) -> None:
    """Wait for any other pass on this row (of ``lock_class``'s table); held until the
    transaction ends (or the worker's connection dies with it)."""
    lock_all([row_id], lock_class=lock_class)


def lock_all(row_ids: list[int], *, lock_class: int = ADVISORY_LOCK_CLASS) -> None:
    """``lock`` on every row, one after another in id order (one query)."""
    if connection.vendor == "postgresql" and row_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_advisory_xact_lock(%s::int, (id %% 2147483648)::int)) "
                "FROM (SELECT unnest(%s::bigint[]) AS id ORDER BY 1) AS rows",
                [lock_class, sorted(row_ids)],
            )


def record(
    state: ReconcileState,
    *,
    outcome: Outcome,
    error: KubeError | None,
    started,
    changes: dict | None = None,
) -> None:
    """Write the pass's outcome, and ``changes`` beside it. A change requested after the pass
    started leaves the row pending: the pass that change scheduled will settle it."""
    fields = outcome_fields(outcome=outcome, error=error, started=started, changes=changes)
    if outcome.namespace_deleted and error is None:
        fields["namespace_deleted_at"] = state.namespace_deleted_at or fields["last_applied_at"]
    type(state).objects.filter(pk=state.pk).update(**fields)


def outcome_fields(
    *, outcome: Outcome, error: KubeError | None, started, changes: dict | None = None
) -> dict:
    """The columns ``record`` writes for a pass's outcome (for one row or, from a sweep, for
    many that ended alike)."""
    now = timezone.now()
    Status = ReconcileState.Status
    fields: dict = {"last_reconciled_at": now, "reconcile_runs": F("reconcile_runs") + 1}
    settled_or_pending = Case(
        When(reconcile_requested_at__gt=started, then=Value(Status.PENDING)),
        default=Value(Status.IN_SYNC),
    )
    if error is not None:
        fields.update(
            status=Status.ERROR,
            last_error=str(error),
            last_error_at=now,
            consecutive_failures=F("consecutive_failures") + 1,
        )
    else:
        fields.update(last_applied_at=now, last_write_count=outcome.writes, consecutive_failures=0)
        if outcome.namespace_deleted:
            fields.update(
                status=Status.DELETED,
                applied_quota={},
                namespace_owned=None,  # gone: whoever makes it next, it is not known to be ours
            )
        else:
            fields.update(status=settled_or_pending)
    fields.update(changes or {})
    return fields


def queues_applied_after(*, outcome: Outcome, error: KubeError | None, kueue_mode: bool) -> dict:
    """The ``queues_applied`` a pass leaves on its state: what it found when it read the queues
    and succeeded; otherwise, in Kueue mode, that some may be there (a failed pass may have
    made some); otherwise unchanged."""
    if error is None and outcome.queues is not None:
        return {"queues_applied": outcome.queues}
    if kueue_mode:
        return {"queues_applied": True}
    return {}


def finish(outcome: Outcome, error: KubeError | None, what: str) -> Outcome:
    """Log the recorded pass; raise its error (for the task to retry a transient one)."""
    if error is not None:
        logger.warning("reconcile of %s failed: %s", what, error)
        raise error
    if outcome.writes:
        logger.info("reconciled %s: applied %s, deleted %s", what, outcome.applied, outcome.deleted)
    return outcome
