"""What a team should have on a cluster, read from the database as it is now: its grants in
effect, its active members, the cluster's GPU kinds and object limits (``team_state``), and in
Kueue mode the cluster's Kueue figures and the team's queue policy, built into objects by the pure
builders (``reconcile.manifests``, ``reconcile.queue_manifests``) in ``desired_state``.

A sweep reads this once for all the teams of a cluster (``team_states``, ``queue_policies``)
rather than once a team.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.conf import settings
from django.utils import timezone

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity, QuotaMode
from reconcile import fair_share, manifests, queue_manifests
from tenants.models import (
    ClusterState,
    Membership,
    QuotaGrant,
    Team,
    TeamObjectLimits,
    TeamQueuePolicy,
)
from tenants.object_limits import merged_object_limits


def policy() -> manifests.Policy:
    return manifests.Policy(
        portal_name=settings.PORTAL_NAME,
        max_pods=settings.PORTAL_TEAM_MAX_PODS,
        default_cpu_request_millicores=settings.PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES,
        default_cpu_limit_millicores=settings.PORTAL_CONTAINER_DEFAULT_CPU_LIMIT_MILLICORES,
        default_memory_request_mib=settings.PORTAL_CONTAINER_DEFAULT_MEMORY_REQUEST_MIB,
        default_memory_limit_mib=settings.PORTAL_CONTAINER_DEFAULT_MEMORY_LIMIT_MIB,
    )


def kueue_cluster_state(cluster: Cluster) -> queue_manifests.KueueCluster:
    """What the cluster's Kueue objects are made of, as the database holds it now (two
    queries)."""
    capacities = list(GpuCapacity.objects.filter(cluster=cluster))
    models = GpuModelCapacity.objects.filter(cluster=cluster).values_list("gpu_model", flat=True)
    return queue_manifests.kueue_cluster(
        portal_name=settings.PORTAL_NAME,
        gpu_resources=[c.resource_name for c in capacities],
        gpu_models=models,
        gpu_node_selector=cluster.gpu_node_selector or {},
        gpu_taint_key=cluster.gpu_taint_key,
        gpu_model_label=cluster.gpu_model_label,
        gpu_capacity={c.resource_name: c.capacity for c in capacities},
        borrowers_share_by_weight=cluster.borrowers_share_by_weight,
        protects_borrowers=cluster.borrower_min_runtime_seconds > 0,
    )


def queue_policy(*, team: Team, cluster: Cluster) -> queue_manifests.QueuePolicy:
    """The team's borrowing, lending and weight on the cluster (the defaults without a row)."""
    return queue_policies(team_ids=[team.pk], cluster=cluster)[team.pk]


def queue_policies(
    *, team_ids: list[int], cluster: Cluster, now: datetime.datetime | None = None
) -> dict[int, queue_manifests.QueuePolicy]:
    """``queue_policy`` of every team of ``team_ids``, by team id: one query, and with the
    cluster's usage-decayed fair sharing on (``Cluster.fair_share_half_life_hours``) the teams'
    decayed use from the registered reader (``register_usage_reader``; one more), which lowers
    each opportunistic queue's weight (``reconcile.fair_share``)."""
    policies = stored_queue_policies(team_ids=team_ids, clusters=[cluster])[cluster.pk]
    uses = decayed_uses(team_ids=team_ids, cluster=cluster, now=now)
    return lowered_by_use(policies, cluster=cluster, uses=uses)


def stored_queue_policies(
    *, team_ids: list[int], clusters: list[Cluster]
) -> dict[int, dict[int, queue_manifests.QueuePolicy]]:
    """The policies of ``team_ids`` on each of ``clusters``, by cluster id and then team id, as
    ``TeamQueuePolicy`` holds them (the defaults without a row), before any decayed use: one
    query, whatever the number of clusters and teams."""
    policies = {c.pk: {pk: queue_manifests.QueuePolicy() for pk in team_ids} for c in clusters}
    for row in TeamQueuePolicy.objects.filter(team_id__in=team_ids, cluster__in=clusters):
        policies[row.cluster_id][row.team_id] = queue_manifests.QueuePolicy(
            borrowing_limit=row.borrowing_limit,
            lending_limit=row.lending_limit,
            fair_sharing_weight=row.fair_sharing_weight,
        )
    return policies


def lowered_by_use(
    policies: dict[int, queue_manifests.QueuePolicy],
    *,
    cluster: Cluster,
    uses: dict[int, float] | None,
) -> dict[int, queue_manifests.QueuePolicy]:
    """``policies`` (by team id) on ``cluster`` with each opportunistic queue's weight lowered
    by the team's decayed GPU-hours in ``uses`` (teams left out: none; None: the cluster's
    usage decay is off, the plain weights). The one place of this arithmetic: the reconcile
    writes these weights and the fair-share explainer (``gpujobs.fair_share_reads``) shows
    them. No query."""
    if uses is None:
        return policies
    return {
        pk: replace(
            policy,
            borrowing_weight=fair_share.borrowing_weight(
                policy.fair_sharing_weight,
                decayed_use=fair_share.rounded_use(uses.get(pk, 0.0)),
                scale_gpu_hours=cluster.fair_share_usage_scale_gpu_hours,
            ),
        )
        for pk, policy in policies.items()
    }


# (cluster=, team_ids=, now=) -> decayed GPU-hours of opportunistic jobs by team id (teams
# without use may be left out). The job side registers it (``gpujobs.apps``): this app never
# imports the apps that run work (the pattern of ``tenants.impact``).
UsageReader = Callable[..., dict[int, float]]
_usage_readers: list[UsageReader] = []


def register_usage_reader(reader: UsageReader) -> None:
    """Count ``reader``'s decayed use in the teams' borrowing weights."""
    if reader not in _usage_readers:
        _usage_readers.append(reader)


def decayed_uses(
    *, team_ids: list[int], cluster: Cluster, now: datetime.datetime | None = None
) -> dict[int, float] | None:
    """The teams' decayed use on the cluster, summed over the registered readers; None when the
    cluster's usage-decayed fair sharing is off."""
    if not cluster.fair_share_half_life_hours:
        return None
    now = now or timezone.now()
    total: dict[int, float] = {}
    for reader in _usage_readers:
        for pk, use in reader(cluster=cluster, team_ids=team_ids, now=now).items():
            total[pk] = total.get(pk, 0.0) + use
    return total


@dataclass(frozen=True)
class QueueLimits:
    """What a team's queues on a Kueue-mode cluster hold, as the reconcile builds them: its own
    GPUs per (GPU kind, model) ("" for any model: the any-gpu flavor), the most its queues can
    ever admit per kind (the ResourceQuota's ceiling) and its policy. For the job side, to refuse
    up front a job that could never run."""

    own: dict[tuple[str, str], int]
    ceiling: dict[str, int]
    policy: queue_manifests.QueuePolicy


def team_queue_limits(*, team: Team, cluster: Cluster) -> QueueLimits:
    """The team's queue figures on the cluster from the database as it is now (whatever the
    cluster's mode: they are what Kueue mode gives it)."""
    state = team_state(team=team, cluster=cluster)
    kueue = kueue_cluster_state(cluster)
    policy = queue_policy(team=team, cluster=cluster)
    return QueueLimits(
        own=queue_manifests.own_gpus(state, kueue),
        ceiling=queue_manifests.quota_ceiling(state, kueue, policy),
        policy=policy,
    )


@dataclass(frozen=True)
class Desired:
    """What a pass should leave on the cluster for the team."""

    objects: list[dict]
    queues: bool  # Kueue mode: the team's queues are among the objects


def team_state(*, team: Team, cluster: Cluster) -> manifests.TeamOnCluster:
    """The team's state on the cluster as the database holds it now (three queries). Only
    active users are members on the cluster: deactivating a user drops them from every
    binding."""
    return team_states(teams=[team], cluster=cluster)[team.pk]


def team_states(
    *, teams: list[Team], cluster: Cluster, today: datetime.date | None = None
) -> dict[int, manifests.TeamOnCluster]:
    """``team_state`` of many teams at once, by team id: three queries whatever their number
    (a sweep over a cluster's teams reads the database once, not once a team). Grants are in
    effect from their first day to their last, as of ``today`` (default: the local date): a
    grant booked ahead reaches the cluster with the first pass on its first day."""
    ids = [team.pk for team in teams]
    grants: dict[int, list[manifests.Grant]] = {pk: [] for pk in ids}
    for g in QuotaGrant.objects.filter(
        team_id__in=ids, cluster=cluster, state=QuotaGrant.State.ACTIVE
    ).only(
        "team_id", "gpu_resource", "gpus", "starts_on", "ends_on", "cpu_cores", "memory_gib",
        "state", "gpu_model",
    ):  # fmt: skip
        grants[g.team_id].append(
            manifests.Grant(
                gpu_resource=g.gpu_resource,
                gpus=g.gpus,
                starts_on=g.starts_on,
                ends_on=g.ends_on,
                cpu_cores=g.cpu_cores,
                memory_gib=g.memory_gib,
                state=g.state,
                gpu_model=g.gpu_model,
            )
        )
    members: dict[int, list[manifests.Member]] = {pk: [] for pk in ids}
    for team_id, username, role in Membership.objects.filter(
        team_id__in=ids, user__is_active=True
    ).values_list("team_id", "user__username", "role"):
        members[team_id].append(manifests.Member(username=username, role=role))
    offered = list(
        GpuCapacity.objects.filter(cluster=cluster).values_list("resource_name", flat=True)
    )
    today = today or timezone.localdate()
    team_limits = {
        team_id: limits
        for team_id, limits in TeamObjectLimits.objects.filter(
            team_id__in=ids, cluster=cluster
        ).values_list("team_id", "limits")
    }
    return {
        team.pk: manifests.team_on_cluster(
            slug=team.slug,
            today=today,
            gpu_resources=offered,
            grants=grants[team.pk],
            members=members[team.pk],
            user_prefix=cluster.user_prefix,
            archived=team.archived_at is not None,
            pod_security_level=cluster.pod_security_level,
            external_services=team.external_services_allowed,
            object_limits=merged_object_limits(cluster, team_limits.get(team.pk)),
        )
        for team in teams
    }


def admission_in_place(cluster: Cluster) -> bool:
    """Whether the cluster's admission policies have been applied (members are bound in a
    team namespace only then: the guard rails come before the access)."""
    return ClusterState.objects.filter(cluster=cluster, admission_applied_at__isnull=False).exists()


def desired_state(
    *,
    team: Team,
    cluster: Cluster,
    rules: manifests.Policy,
    state: manifests.TeamOnCluster | None = None,
    kueue: queue_manifests.KueueCluster | None = None,
    queue_rules: queue_manifests.QueuePolicy | None = None,
    admission: bool | None = None,
) -> Desired:
    """Everything the team should have on the cluster: in Kueue mode its queues too, with the
    ResourceQuota at their ceiling. No member is bound while the cluster's admission policies
    are not in place.

    What is not given is read from the database now (a sweep reads it once for all teams and
    gives it: ``state``, ``kueue``, ``queue_rules``, ``admission``)."""
    if state is None:
        state = team_state(team=team, cluster=cluster)
    kueue_mode = cluster.quota_mode == QuotaMode.KUEUE
    if kueue_mode:
        kueue = kueue_cluster_state(cluster) if kueue is None else kueue
        policy = queue_policy(team=team, cluster=cluster) if queue_rules is None else queue_rules
        ceiling = queue_manifests.quota_ceiling(state, kueue, policy)
        state = replace(state, gpu_ceiling=tuple(sorted(ceiling.items())))
    objects = manifests.desired_objects(state, rules)
    if kueue_mode:
        objects += queue_manifests.team_queue_objects(
            state, kueue, policy, rules, department=department_slug(team)
        )
    if not (admission_in_place(cluster) if admission is None else admission):
        objects = [obj for obj in objects if obj["kind"] != "RoleBinding"]
    return Desired(objects, queues=kueue_mode)


def department_slug(team: Team) -> str:
    """The slug of the team's department, whose cohort its queues are in ("" for none)."""
    return team.department.slug if team.department_id else ""
