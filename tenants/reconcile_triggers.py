"""How a change asks for a team's namespace on a cluster, or a cluster's cluster-wide objects
(admission policies, Kueue's flavors and priority classes), to be brought in line: the one way
anything enqueues ``tasks.reconcile_team`` and ``tasks.reconcile_cluster``.

Inside a change, ``request_reconcile_after_commit`` (or ``request_reconcile_on_team_clusters``
for every cluster of a team, ``request_reconcile_on_cluster_teams`` for every team of a
cluster, ``request_cluster_reconcile_after_commit`` for the cluster-wide objects,
``request_cohort_reconcile`` when departments change on Kueue-mode clusters) marks the
state as behind in the same transaction and enqueues the task once the change is committed.
Outside any change (the periodic sweep), ``enqueue_reconcile_now`` sends it at once. A broker
that is down never fails a change: the mark stays, and the sweep catches up.

The capacity sync (``clusters``, which imports no app) says when a cluster's GPUs changed with
``clusters.signals.capacity_changed``; ``on_capacity_changed`` (connected in ``TenantsConfig``)
asks for the passes that depend on them.
"""

import logging
from collections.abc import Iterable

from celery import current_app
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from clusters.models import Cluster, QuotaMode
from tenants.models import ClusterState, Team, TeamCluster
from tenants.selectors import cluster_team_ids, team_cluster_ids

logger = logging.getLogger(__name__)


def request_reconcile_after_commit(*, team_id: int, cluster_id: int) -> None:
    """Bring the team's namespace on the cluster in line with the database, after commit.

    The one hook every grant change calls. It runs inside the caller's transaction: the marker
    is written with the change, and the task is only enqueued once the change is committed, so
    a worker never reads the database from before it.
    """
    arriving = mark_reconcile_requested(team_id=team_id, cluster_id=cluster_id)
    transaction.on_commit(lambda: _send_reconcile(team_id=team_id, cluster_id=cluster_id))
    if arriving and _in_a_department_on_kueue(team_id=team_id, cluster_id=cluster_id):
        # Its department's cohort (and those above) may not be on the cluster yet.
        request_cluster_reconcile_after_commit(cluster_id=cluster_id)


def mark_reconcile_requested(*, team_id: int, cluster_id: int) -> bool:
    """Record that the team's namespace on the cluster is behind the database (pending), without
    enqueuing a pass: for a caller whose own pass follows (the periodic sweep). Whether the team
    is arriving on the cluster (no namespace there yet, or a deleted one)."""
    row, created = TeamCluster.objects.get_or_create(team_id=team_id, cluster_id=cluster_id)
    TeamCluster.objects.filter(team_id=team_id, cluster_id=cluster_id).update(
        reconcile_requested_at=timezone.now(), status=TeamCluster.Status.PENDING
    )
    return created or row.namespace_deleted_at is not None


def _in_a_department_on_kueue(*, team_id: int, cluster_id: int) -> bool:
    return (
        Team.objects.filter(pk=team_id, department__isnull=False).exists()
        and Cluster.objects.filter(pk=cluster_id, quota_mode=QuotaMode.KUEUE).exists()
    )


def request_reconcile_on_team_clusters(*, team: Team) -> None:
    """``request_reconcile_after_commit`` on every cluster the team is on (its members changed,
    or it was archived)."""
    for cluster_id in team_cluster_ids(team=team):
        request_reconcile_after_commit(team_id=team.pk, cluster_id=cluster_id)


def request_reconcile_on_cluster_teams(*, cluster_id: int) -> None:
    """``request_reconcile_after_commit`` for every team on the cluster (its quota mode or its
    GPUs changed)."""
    for team_id in cluster_team_ids(cluster_id=cluster_id):
        request_reconcile_after_commit(team_id=team_id, cluster_id=cluster_id)


def request_cluster_reconcile_after_commit(*, cluster_id: int) -> None:
    """Bring the cluster's cluster-wide objects in line with the database, after commit (as
    ``request_reconcile_after_commit`` does for a team)."""
    ClusterState.objects.get_or_create(cluster_id=cluster_id)
    ClusterState.objects.filter(cluster_id=cluster_id).update(
        reconcile_requested_at=timezone.now(), status=ClusterState.Status.PENDING
    )
    transaction.on_commit(lambda: _send_cluster_reconcile(cluster_id=cluster_id))


def request_reconcile_of_cluster_settings(*, cluster_id: int) -> None:
    """A cluster's settings changed (placement, registries, Pod Security level, user prefix):
    its admission policies and every team's namespace there follow them."""
    request_cluster_reconcile_after_commit(cluster_id=cluster_id)
    request_reconcile_on_cluster_teams(cluster_id=cluster_id)


def request_cohort_reconcile(
    *, team_ids: Iterable[int], queue_team_ids: Iterable[int] = ()
) -> None:
    """A team changed department, or a department moved or was renamed: on every Kueue-mode
    cluster of the teams concerned (``team_ids``: those in the departments that moved), the
    cohort tree follows the departments (the cluster-wide pass, which also prunes the cohorts
    of departments left without teams there), and the queues of ``queue_team_ids`` move to
    their department's cohort (their own passes)."""
    requeue = set(queue_team_ids)
    kueue = set(Cluster.objects.filter(quota_mode=QuotaMode.KUEUE).values_list("pk", flat=True))
    clusters: set[int] = set()
    for team in Team.objects.filter(pk__in=set(team_ids) | requeue).order_by("pk"):
        for cluster_id in team_cluster_ids(team=team):
            if cluster_id not in kueue:
                continue
            clusters.add(cluster_id)
            if team.pk in requeue:
                request_reconcile_after_commit(team_id=team.pk, cluster_id=cluster_id)
    for cluster_id in sorted(clusters):
        request_cluster_reconcile_after_commit(cluster_id=cluster_id)


def on_capacity_changed(sender, *, cluster_id: int, models_changed: bool, **kwargs) -> None:
    """The capacity sync changed a cluster's GPU figures (inside its transaction). In Kueue mode
    the teams' queues list every model's flavor and their ResourceQuotas' ceilings follow the
    capacity; the flavors themselves follow the models."""
    if not Cluster.objects.filter(pk=cluster_id, quota_mode=QuotaMode.KUEUE).exists():
        return
    if models_changed:
        request_cluster_reconcile_after_commit(cluster_id=cluster_id)
    request_reconcile_on_cluster_teams(cluster_id=cluster_id)


def enqueue_cluster_reconcile_now(*, cluster_id: int) -> None:
    """Enqueue a cluster-wide reconcile now, outside any change (the periodic sweep)."""
    _send_cluster_reconcile(cluster_id=cluster_id)


def enqueue_reconcile_now(*, team_id: int, cluster_id: int) -> None:
    """Enqueue a reconcile now, outside any change (the periodic sweep)."""
    _send_reconcile(team_id=team_id, cluster_id=cluster_id)


def _send_reconcile(*, team_id: int, cluster_id: int) -> None:
    """Send the task; if the broker is unreachable, log it rather than fail a committed change.

    The decision is already saved and ``reconcile_requested_at`` shows the cluster is behind;
    the periodic sweep picks it up once the broker is back.
    """
    try:
        current_app.tasks["reconcile.tasks.reconcile_team"].delay(
            team_id=team_id, cluster_id=cluster_id
        )
    except OperationalError:
        logger.exception("Could not enqueue reconcile of team %s on %s", team_id, cluster_id)


def _send_cluster_reconcile(*, cluster_id: int) -> None:
    try:
        current_app.tasks["reconcile.tasks.reconcile_cluster"].delay(cluster_id=cluster_id)
    except OperationalError:
        logger.exception("Could not enqueue reconcile of cluster %s", cluster_id)
