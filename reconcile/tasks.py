"""Celery tasks: small, idempotent, given ids. The work itself lives in services and reconcile.

Every task is acknowledged late (``CELERY_TASK_ACKS_LATE``): a worker that dies mid-task leaves
the message to be delivered again, and running a reconcile twice is harmless because it applies
the database's state as it is then, not the event that scheduled it.
"""

import datetime
from collections import defaultdict

from celery import shared_task
from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import OperationalError
from django.utils import timezone

from clusters.kube import KubeError, TransientKubeError
from clusters.models import Cluster
from reconcile import cluster_pass, sweep, team_pass
from tenants import grant_starts, quota, reconcile_triggers
from tenants.models import TeamCluster

# Transient cluster errors (unreachable, 409, 429, 5xx, Kueue's webhooks down) are retried with
# backoff; past the retries the periodic sweep takes over.
RECONCILE_TASK = {
    "acks_late": True,
    "autoretry_for": (TransientKubeError, OperationalError),
    "retry_backoff": True,
    "retry_backoff_max": settings.PORTAL_RECONCILE_RETRY_BACKOFF_MAX,
    "retry_jitter": True,
    "max_retries": settings.PORTAL_RECONCILE_MAX_RETRIES,
}


def run_pass(run, *, gone: str) -> dict:
    """A reconcile pass's outcome, or the error that needs a person (recorded on the state, not
    retried); transient errors are raised for Celery to retry."""
    try:
        outcome = run()
    except TransientKubeError:
        raise
    except KubeError as error:
        return {"error": str(error)}
    except ObjectDoesNotExist:
        return {"error": gone}
    return outcome.as_dict()


@shared_task(**RECONCILE_TASK)
def reconcile_team(*, team_id: int, cluster_id: int) -> dict:
    """Bring the team's namespace on the cluster in line with its grants and members.

    Transient cluster errors are retried; other errors are recorded on the team's cluster
    status, where a lead can read them, and not retried: they need a person.
    """
    return run_pass(
        lambda: team_pass.reconcile_team_on_cluster(team_id=team_id, cluster_id=cluster_id),
        gone="the team or the cluster no longer exists",
    )


@shared_task(**RECONCILE_TASK)
def reconcile_cluster(*, cluster_id: int) -> dict:
    """Bring the cluster's cluster-wide objects (admission policies; in Kueue mode flavors and
    priority classes) in line with its settings, quota mode and GPU models; retried like
    ``reconcile_team``."""
    return run_pass(
        lambda: cluster_pass.reconcile_cluster(cluster_id=cluster_id),
        gone="the cluster no longer exists",
    )


@shared_task(acks_late=True)
def reconcile_sweep(today: str | None = None) -> int:
    """The periodic sweep: expire grants whose period is over and record the first day of those
    booked ahead, then reconcile every team on every cluster it has been on, and the
    cluster-wide objects of every cluster (its admission policies, its Kueue objects), so hand
    edits are reverted, expired grants leave the quota and grants reach it on their first day.
    Returns how many passes it made or enqueued.

    ``today`` (an ISO date; default the local date) is the day whose grants are in effect in
    the sweep's own passes: tests give another to see a grant start.

    The teams of a cluster are swept here in one go (``reconcile.sweep``: one list per
    kind, then passes side by side for the teams that are not in sync). Where the cluster cannot
    be listed, and for passes that failed for a reason worth retrying, each team's own task is
    enqueued: it retries with backoff."""
    day = datetime.date.fromisoformat(today) if today else timezone.localdate()
    quota.quota_grants_expire(today=day)
    grant_starts.quota_grants_start(today=day)
    pairs = TeamCluster.objects.filter(namespace_deleted_at__isnull=True).values_list(
        "cluster_id", "team_id"
    )
    teams_by_cluster: dict[int, list[int]] = defaultdict(list)
    for cluster_id, team_id in pairs.order_by("cluster_id", "team_id").iterator():
        teams_by_cluster[cluster_id].append(team_id)
    count = 0
    for cluster_id, team_ids in teams_by_cluster.items():
        try:
            retry = sweep.reconcile_cluster_teams(
                cluster_id=cluster_id, team_ids=team_ids, today=day
            ).to_retry
        except KubeError:
            retry = team_ids
        for team_id in retry:
            reconcile_triggers.enqueue_reconcile_now(team_id=team_id, cluster_id=cluster_id)
        count += len(team_ids)
    for cluster_id in Cluster.objects.order_by("pk").values_list("pk", flat=True):
        reconcile_triggers.enqueue_cluster_reconcile_now(cluster_id=cluster_id)
        count += 1
    return count
