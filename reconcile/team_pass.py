"""Bring one team's namespace on one cluster in line with the database, and say how it went.

Level-triggered: whatever woke it, a pass reads the team's grants and memberships as they are
now, builds the desired objects (``reconcile.manifests``), compares them with what the cluster
holds under the portal's labels, applies only what differs (server-side apply, one field manager)
and deletes what the portal owns but no longer wants. A pass over an unchanged cluster makes
reads only: one GET of the namespace and one labelled LIST per kind.

On a cluster in Kueue mode the team's queues (``reconcile.queue_manifests``) are among the
desired objects and the ResourceQuota is their ceiling. In quota only mode they are not, and a
pass lists them (to prune them) only while the team's row says a Kueue-mode pass may have left
some (``queues_applied``), so a quota only pass over an unchanged cluster reads no more than
before.

Passes for the same team and cluster are serialised by a PostgreSQL advisory lock taken before
the database is read: a pass that started from older grants can never overwrite what a later one
applied. (An advisory lock rather than a row lock: approvals update the ``TeamCluster`` row and
must not wait for a pass talking to a slow cluster.) The outcome (in sync, or the error in words;
when it last applied; what the quota holds) is written to that row, where the pages and the API
read it.

The pass is this module; its pieces are what the team should have (``reconcile.desired_state``),
making the cluster hold it (``reconcile.namespace_sync``), and what every reconcile pass shares,
the team's, the cluster's and a service's (``reconcile.passes``: the outcome, the request
pool, the advisory locks, recording the outcome).
"""

from __future__ import annotations

import datetime
from concurrent.futures import ThreadPoolExecutor

from django.db import transaction
from django.utils import timezone

from clusters.kube import KubeClient, KubeError
from clusters.models import Cluster, QuotaMode
from reconcile import queue_manifests
from reconcile.cluster_pass import reconcile_cluster
from reconcile.desired_state import (
    admission_in_place,
    desired_state,
    kueue_cluster_state,
    policy,
    queue_policies,
    team_states,
)
from reconcile.namespace_sync import delete_namespace, sync
from reconcile.namespaces import NamespaceNotOwned, reserved
from reconcile.passes import Outcome, finish, lock_all, queues_applied_after, record
from tenants.models import TeamCluster


def put_admission_in_place(*, cluster: Cluster, kube: KubeClient) -> KubeError | None:
    """Run the cluster's own pass now (its admission policies; in Kueue mode its flavors too),
    so that a team pass on a cluster without them binds its members in the same pass. The
    cluster pass's error when it failed (recorded on the cluster's state)."""
    try:
        reconcile_cluster(cluster_id=cluster.pk, kube=kube)
    except KubeError as error:
        return error
    return None


def reconcile_team_on_cluster(
    *,
    team_id: int,
    cluster_id: int,
    kube: KubeClient | None = None,
    today: datetime.date | None = None,
) -> Outcome:
    """One reconcile pass of the team on the cluster, its outcome recorded on ``TeamCluster``.

    Raises the ``KubeError`` when the pass failed (after recording it), so the task can retry
    transient ones.
    """
    result = reconcile_teams_on_cluster(
        team_ids=[team_id], cluster_id=cluster_id, kube=kube, today=today
    )
    if team_id not in result:
        raise TeamCluster.DoesNotExist(f"team {team_id} or cluster {cluster_id} does not exist")
    return finish(*result[team_id])


def reconcile_teams_on_cluster(
    *,
    team_ids: list[int],
    cluster_id: int,
    kube: KubeClient | None = None,
    concurrency: int = 1,
    today: datetime.date | None = None,
) -> dict[int, tuple[Outcome, KubeError | None, str]]:
    """A reconcile pass of each team on the cluster, each outcome recorded on its
    ``TeamCluster``; by team id, each pass's outcome, its error (None when it succeeded) and what
    it was of (for ``finish``). A team that no longer exists has no entry.

    The passes share one transaction: their advisory locks are taken together (in id order, so
    two such batches cannot deadlock), the database is read once for all of them after that,
    and ``concurrency`` of them talk to the cluster at once. Each team's own pass is this with
    one team; a sweep batches many, which spares it most of the per-pass database work.
    """
    started = timezone.now()
    results: dict[int, tuple[Outcome, KubeError | None, str]] = {}
    with transaction.atomic():
        present = set(
            TeamCluster.objects.filter(team_id__in=team_ids, cluster_id=cluster_id).values_list(
                "team_id", flat=True
            )
        )
        for team_id in set(team_ids) - present:
            TeamCluster.objects.get_or_create(team_id=team_id, cluster_id=cluster_id)
        pks = sorted(
            TeamCluster.objects.filter(team_id__in=team_ids, cluster_id=cluster_id).values_list(
                "pk", flat=True
            )
        )
        # Serialise passes for these teams and this cluster, and only then read the database:
        # the rows, the teams and the cluster as they are now.
        lock_all(pks)
        states = list(
            TeamCluster.objects.select_related("team", "team__department", "cluster")
            .filter(pk__in=pks)
            .order_by("pk")
        )
        if not states:  # the teams or the cluster are gone
            return results
        cluster = states[0].cluster
        rules = policy()
        kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
        client = kube
        setup_error: KubeError | None = None
        admission = admission_in_place(cluster)
        try:
            client = kube or KubeClient.for_cluster(cluster)
        except KubeError as failure:
            setup_error = failure
        # No member is bound where the cluster's admission policies are not in place: put
        # them there first. If that fails the rest is applied all the same, without bindings,
        # and each pass ends with the cluster's error (retried like any other).
        policies_error = None
        if setup_error is None and not admission and any(not deleting(s) for s in states):
            policies_error = put_admission_in_place(cluster=cluster, kube=client)
            admission = policies_error is None
        teams = [state.team for state in states]
        team_state_now = team_states(teams=teams, cluster=cluster, today=today)
        kueue = kueue_cluster_state(cluster) if kueue_mode else None
        queue_rules = queue_policies(team_ids=[team.pk for team in teams], cluster=cluster)

        def one(state: TeamCluster) -> tuple[Outcome, KubeError | None]:
            if setup_error is not None:
                return Outcome(), setup_error
            team = state.team
            part = client.counting_apart()
            outcome = Outcome()
            try:
                try:
                    if deleting(state):
                        outcome = delete_namespace(part, slug=team.slug, rules=rules)
                    elif team.slug in (cluster.reserved_namespaces or []):
                        raise reserved(slug=team.slug, cluster_name=cluster.name)
                    else:
                        desired = desired_state(
                            team=team,
                            cluster=cluster,
                            rules=rules,
                            state=team_state_now[team.pk],
                            kueue=kueue,
                            queue_rules=queue_rules.get(team.pk, queue_manifests.QueuePolicy()),
                            admission=admission,
                        )
                        outcome = sync(
                            part,
                            desired.objects,
                            slug=team.slug,
                            rules=rules,
                            queues=desired.queues or state.queues_applied,
                        )
                finally:
                    outcome.reads, outcome.writes = part.reads, part.writes
                if policies_error is not None:
                    raise policies_error
            except KubeError as failure:
                return outcome, failure
            return outcome, None

        if concurrency > 1 and len(states) > 1:
            with ThreadPoolExecutor(
                max_workers=min(concurrency, len(states)), thread_name_prefix="reconcile-pass"
            ) as pool:
                passes = list(pool.map(one, states))
        else:
            passes = [one(state) for state in states]
        for state, (outcome, error) in zip(states, passes, strict=True):
            changes = queues_applied_after(outcome=outcome, error=error, kueue_mode=kueue_mode)
            if error is None and not outcome.namespace_deleted:
                changes.update(applied_quota=outcome.quota, namespace_owned=True)
            elif isinstance(error, NamespaceNotOwned):
                changes["namespace_owned"] = False
            # Any other failure says nothing new about whose the namespace is.
            record(state, outcome=outcome, error=error, started=started, changes=changes)
            results[state.team_id] = (outcome, error, f"{state.team.slug} on {cluster.name}")
    return results


def deleting(state: TeamCluster) -> bool:
    """Whether the pass deletes the team's namespace (archived, and asked to)."""
    return state.team.archived_at is not None and bool(state.namespace_delete_requested_at)
