"""Reads: what each user may see, and the capacity figures the review queue shows."""

import datetime
import functools
import operator
from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from tenants import department_tree
from tenants.models import (
    AuditEvent,
    Department,
    DepartmentCeiling,
    Membership,
    QuotaGrant,
    QuotaRequest,
    Team,
    TeamCluster,
    TeamQueuePolicy,
)
from tenants.period_sums import MeetingSums
from tenants.permissions import is_portal_admin


def teams_visible_to(user: User | AnonymousUser) -> QuerySet[Team]:
    """Admins see every team; everyone else only the teams they belong to."""
    if is_portal_admin(user):
        return Team.objects.all()
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).distinct()


def namespace_ownership(*, cluster: Cluster, namespace: str) -> bool | None:
    """Whose the last reconcile found the team's namespace (``namespace``, its slug) on the
    cluster: the portal's (True), someone else's (False), or not known (None: never looked at,
    or deleted since). See ``reconcile.namespaces``."""
    return (
        TeamCluster.objects.filter(cluster=cluster, team__slug=namespace)
        .values_list("namespace_owned", flat=True)
        .first()
    )


def owned_namespaces(*, cluster: Cluster, among: set[str] | None = None) -> set[str]:
    """The teams' namespaces on the cluster that the last reconcile found the portal's."""
    rows = TeamCluster.objects.filter(cluster=cluster, namespace_owned=True)
    if among is not None:
        rows = rows.filter(team__slug__in=among)
    return set(rows.values_list("team__slug", flat=True))


def owned_namespace_team_names(*, cluster: Cluster, among: set[str]) -> dict[str, str]:
    """Of the namespaces ``among``, those the last reconcile found the portal's on the
    cluster, each with its team's name (one query)."""
    rows = TeamCluster.objects.filter(
        cluster=cluster, namespace_owned=True, team__slug__in=among
    ).values_list("team__slug", "team__name")
    return dict(rows)


def _team_scoped(queryset: QuerySet, user: User | AnonymousUser) -> QuerySet:
    if is_portal_admin(user):
        return queryset
    if not user.is_authenticated:
        return queryset.none()
    return queryset.filter(team__memberships__user=user)


def _team_or_department_scoped(queryset: QuerySet, user: User | AnonymousUser) -> QuerySet:
    """As ``_team_scoped``, and for a department admin also the rows of the teams of the
    departments they administer (nested ones included)."""
    if is_portal_admin(user):
        return queryset
    if not user.is_authenticated:
        return queryset.none()
    # Both sides as subqueries: a join on memberships ORed with the department would repeat rows.
    mine = Membership.objects.filter(user=user).values("team_id")
    return queryset.filter(
        Q(team_id__in=mine) | Q(team__department_id__in=_administered_subtree(user))
    )


def _administered_subtree(user: User) -> RawSQL:
    """``administered_department_ids`` as a subquery of the query that uses it, so that the
    lists every user reads cost no query more for it: recursive, however deep departments
    nest (UNION, not UNION ALL: a department is walked once)."""
    admins = Department.admins.through._meta.db_table
    departments = Department._meta.db_table
    return RawSQL(
        f"WITH RECURSIVE administered(id) AS ("
        f"SELECT department_id FROM {admins} WHERE user_id = %s "
        f"UNION SELECT d.id FROM {departments} d JOIN administered a ON d.parent_id = a.id"
        f") SELECT id FROM administered",
        (user.pk,),
    )


def quota_requests_visible_to(user: User | AnonymousUser) -> QuerySet[QuotaRequest]:
    """Requests of the user's teams, and of the teams of the departments they administer."""
    return _team_or_department_scoped(QuotaRequest.objects.all(), user).select_related(
        "team", "cluster", "requested_by", "decided_by"
    )


def quota_grants_visible_to(user: User | AnonymousUser) -> QuerySet[QuotaGrant]:
    """Grants of the user's teams, and of the teams of the departments they administer."""
    return _team_or_department_scoped(QuotaGrant.objects.all(), user).select_related(
        "team", "cluster", "granted_by", "request"
    )


# --- departments -------------------------------------------------------------------------------


def department_parents() -> dict[int, int | None]:
    """The whole department tree in one query, for ``department_tree``."""
    return dict(Department.objects.order_by().values_list("id", "parent_id"))


def administered_department_ids(user: User | AnonymousUser) -> set[int]:
    """The departments the user is an admin of, and every department nested in them."""
    if not user.is_authenticated:
        return set()
    direct = list(user.administered_departments.values_list("id", flat=True))
    if not direct:
        return set()
    parents = department_parents()
    ids: set[int] = set()
    for department_id in direct:
        ids |= department_tree.subtree(department_id, parents)
    return ids


def departments_visible_to(user: User | AnonymousUser) -> QuerySet[Department]:
    """Portal admins see every department; a department admin theirs and those nested in them."""
    if is_portal_admin(user):
        return Department.objects.all()
    return Department.objects.filter(pk__in=administered_department_ids(user))


def department_teams(department: Department) -> QuerySet[Team]:
    """The teams of the department and of every department nested in it."""
    ids = department_tree.subtree(department.pk, department_parents())
    return Team.objects.filter(department_id__in=ids)


def department_ceilings(department: Department) -> QuerySet[DepartmentCeiling]:
    return department.ceilings.select_related("cluster").order_by(
        "cluster__name", "gpu_resource", "gpu_model"
    )


def audit_events_visible_to(user: User | AnonymousUser) -> QuerySet[AuditEvent]:
    """Members see their teams' events; events about no team (clusters) are for admins."""
    return _team_scoped(AuditEvent.objects.all(), user).select_related("actor", "team")


def team_cluster_ids(*, team: Team) -> list[int]:
    """Clusters the team has a namespace on, or is about to: any it has state or a grant on."""
    ids = set(TeamCluster.objects.filter(team=team).values_list("cluster_id", flat=True))
    ids |= set(QuotaGrant.objects.filter(team=team).values_list("cluster_id", flat=True))
    return sorted(ids)


def user_team_ids(*, user: User) -> list[int]:
    """Teams the user is a member of (whatever their role)."""
    return sorted(Membership.objects.filter(user=user).values_list("team_id", flat=True))


def cluster_team_ids(*, cluster_id: int) -> list[int]:
    """Teams on the cluster, or about to be: any with a namespace there not deleted, or an
    active grant there."""
    ids = set(
        TeamCluster.objects.filter(
            cluster_id=cluster_id, namespace_deleted_at__isnull=True
        ).values_list("team_id", flat=True)
    )
    ids |= set(
        QuotaGrant.objects.filter(cluster_id=cluster_id, state=QuotaGrant.State.ACTIVE).values_list(
            "team_id", flat=True
        )
    )
    return sorted(ids)


def grants_overlapping(
    *,
    cluster: Cluster,
    gpu_resource: str,
    starts_on: datetime.date,
    ends_on: datetime.date | None,
    gpu_model: str | None = None,
) -> QuerySet[QuotaGrant]:
    """Active grants of this GPU kind on the cluster whose period meets [starts_on, ends_on]
    (of one model only, when ``gpu_model`` is given).

    Summing them over-counts grants that overlap the period but not each other; that errs on
    the safe side (never over-allocates) and keeps the check one indexed query.
    """
    overlapping = Q(ends_on__isnull=True) | Q(ends_on__gte=starts_on)
    if ends_on is not None:
        overlapping &= Q(starts_on__lte=ends_on)
    if gpu_model is not None:
        overlapping &= Q(gpu_model=gpu_model)
    return QuotaGrant.objects.filter(
        overlapping,
        cluster=cluster,
        gpu_resource=gpu_resource,
        state=QuotaGrant.State.ACTIVE,
    )


def granted_gpus(
    *,
    cluster: Cluster,
    gpu_resource: str,
    starts_on: datetime.date,
    ends_on: datetime.date | None,
    exclude_grant_id: int | None = None,
    gpu_model: str | None = None,
) -> int:
    grants = grants_overlapping(
        cluster=cluster,
        gpu_resource=gpu_resource,
        starts_on=starts_on,
        ends_on=ends_on,
        gpu_model=gpu_model,
    )
    if exclude_grant_id is not None:
        grants = grants.exclude(pk=exclude_grant_id)
    return grants.aggregate(total=Sum("gpus"))["total"] or 0


@dataclass(frozen=True)
class CapacitySummary:
    """A cluster's GPUs of one kind: what may be planned with (capacity times the overcommit
    ratio), what active grants hold from today on, and what is left."""

    cluster_id: int
    gpu_resource: str
    capacity: int
    plannable: int
    granted: int

    @property
    def free(self) -> int:
        return self.plannable - self.granted

    def free_after(self, *, gpus: int, granted_in_period: int) -> int:
        """What approving ``gpus`` would leave, counting the grants that overlap the request's
        own period: the same figure the approval's capacity check uses."""
        return self.plannable - granted_in_period - gpus


def plannable_gpus(capacity: int, overcommit_ratio) -> int:
    """Whole GPUs that may be granted: capacity times the admin's overcommit ratio, rounded down."""
    return int(capacity * overcommit_ratio)


def capacity_summaries() -> dict[tuple[int, str], CapacitySummary]:
    """Every cluster's capacity per GPU kind, in two queries whatever the number of clusters."""
    today = timezone.localdate()
    granted = {
        (row["cluster_id"], row["gpu_resource"]): row["total"]
        for row in QuotaGrant.objects.filter(state=QuotaGrant.State.ACTIVE)
        .filter(Q(ends_on__isnull=True) | Q(ends_on__gte=today))
        .values("cluster_id", "gpu_resource")
        .annotate(total=Sum("gpus"))
    }
    summaries = {}
    for row in GpuCapacity.objects.select_related("cluster"):
        key = (row.cluster_id, row.resource_name)
        summaries[key] = CapacitySummary(
            cluster_id=row.cluster_id,
            gpu_resource=row.resource_name,
            capacity=row.capacity,
            plannable=plannable_gpus(row.capacity, row.cluster.overcommit_ratio),
            granted=granted.get(key, 0),
        )
    return summaries


def model_capacity(*, cluster: Cluster, gpu_resource: str, gpu_model: str) -> int:
    """GPUs of one model the portal may plan with: what its usable nodes offer, never above the
    capacity of the whole kind (an admin's cap on the kind caps its models too)."""
    row = GpuModelCapacity.objects.filter(
        cluster=cluster, resource_name=gpu_resource, gpu_model=gpu_model
    ).first()
    kind = GpuCapacity.objects.filter(cluster=cluster, resource_name=gpu_resource).first()
    if row is None or kind is None:
        return 0
    return min(row.allocatable, kind.capacity)


@dataclass(frozen=True)
class ModelCapacitySummary:
    """A cluster's GPUs of one model (of one kind): what may be planned with, what active
    grants of that model hold from today on, and how its nodes are made (a job larger than
    ``max_per_node`` fits on none)."""

    cluster_id: int
    gpu_resource: str
    gpu_model: str
    capacity: int
    plannable: int
    granted: int
    nodes: int
    max_per_node: int

    @property
    def free(self) -> int:
        return self.plannable - self.granted

    def free_after(self, *, gpus: int, granted_in_period: int) -> int:
        return self.plannable - granted_in_period - gpus


def model_capacity_summaries() -> dict[tuple[int, str], list[ModelCapacitySummary]]:
    """Every cluster's capacity per GPU model, by (cluster id, GPU kind), models in order; in
    two queries whatever the number of clusters."""
    today = timezone.localdate()
    granted = {
        (row["cluster_id"], row["gpu_resource"], row["gpu_model"]): row["total"]
        for row in QuotaGrant.objects.filter(state=QuotaGrant.State.ACTIVE)
        .exclude(gpu_model="")
        .filter(Q(ends_on__isnull=True) | Q(ends_on__gte=today))
        .values("cluster_id", "gpu_resource", "gpu_model")
        .annotate(total=Sum("gpus"))
    }
    kinds = {
        (row.cluster_id, row.resource_name): row
        for row in GpuCapacity.objects.select_related("cluster")
    }
    summaries: dict[tuple[int, str], list[ModelCapacitySummary]] = {}
    for row in GpuModelCapacity.objects.order_by("cluster_id", "resource_name", "gpu_model"):
        kind = kinds.get((row.cluster_id, row.resource_name))
        if kind is None:
            continue
        capacity = min(row.allocatable, kind.capacity)
        summaries.setdefault((row.cluster_id, row.resource_name), []).append(
            ModelCapacitySummary(
                cluster_id=row.cluster_id,
                gpu_resource=row.resource_name,
                gpu_model=row.gpu_model,
                capacity=capacity,
                plannable=plannable_gpus(capacity, kind.cluster.overcommit_ratio),
                granted=granted.get((row.cluster_id, row.resource_name, row.gpu_model), 0),
                nodes=row.nodes,
                max_per_node=row.max_per_node,
            )
        )
    return summaries


@dataclass(frozen=True)
class GrantedInPeriod:
    """What active grants hold during a request's period: GPUs of its kind on its cluster, and
    of its model, as ``granted_gpus`` counts them for the capacity check."""

    kind: int
    model: int


def granted_in_request_periods(requests) -> dict[int, GrantedInPeriod]:
    """For each request (anything with ``pk``, ``cluster_id``, ``gpu_resource``, ``gpu_model``,
    ``starts_on`` and ``ends_on``: a page of the review queue), by pk, what active grants hold
    during its period, as ``granted_gpus`` counts them.

    Two queries a page, the kinds' active grants summed by the day they start on and by the day
    they end on, per GPU model (``period_sums`` does the rest): their rows grow with the days
    grants start and end on, not with the grants nor with the page's size. A subquery per
    request summed every grant of the kind again for each row.
    """
    requests = list(requests)
    kinds = {(r.cluster_id, r.gpu_resource) for r in requests}
    if not kinds:
        return {}
    grants = QuotaGrant.objects.filter(
        functools.reduce(operator.or_, (Q(cluster_id=c, gpu_resource=g) for c, g in kinds)),
        state=QuotaGrant.State.ACTIVE,
    ).order_by()
    model = ("cluster_id", "gpu_resource", "gpu_model")
    started_on: dict[tuple, dict[datetime.date, int]] = {}
    for *key, day, gpus in grants.values_list(*model, "starts_on").annotate(Sum("gpus")):
        started_on.setdefault(tuple(key), {})[day] = gpus
    ended_on: dict[tuple, dict[datetime.date, int]] = {}
    ending = grants.filter(ends_on__isnull=False).values_list(*model, "ends_on")
    for *key, day, gpus in ending.annotate(Sum("gpus")):
        ended_on.setdefault(tuple(key), {})[day] = gpus
    sums = {key: MeetingSums(days, ended_on.get(key, {})) for key, days in started_on.items()}
    models_of_kind: dict[tuple[int, str], list[MeetingSums]] = {}
    for key, of_model in sums.items():
        models_of_kind.setdefault(key[:2], []).append(of_model)

    found = {}
    for r in requests:
        kind = (r.cluster_id, r.gpu_resource)
        of_model = sums.get((*kind, r.gpu_model))
        found[r.pk] = GrantedInPeriod(
            kind=sum(m.meeting(r.starts_on, r.ends_on) for m in models_of_kind.get(kind, ())),
            model=of_model.meeting(r.starts_on, r.ends_on) if of_model else 0,
        )
    return found


def review_queue() -> QuerySet[QuotaRequest]:
    """Pending requests, oldest first: the order admins should decide them in. What grants
    hold during each one's period is ``granted_in_request_periods``' to read, for a page."""
    return (
        QuotaRequest.objects.filter(state=QuotaRequest.State.PENDING)
        .select_related("team", "cluster", "requested_by")
        .order_by("created_at", "id")
    )


def review_queue_of(user: User | AnonymousUser) -> QuerySet[QuotaRequest]:
    """The review queue a user decides from: every pending request for portal admins; for a
    department admin, those of the teams of their departments (nested ones included), whether
    or not they may decide each (``ceilings.delegation`` says)."""
    if is_portal_admin(user):
        return review_queue()
    return review_queue().filter(team__department_id__in=administered_department_ids(user))


def queue_policies_visible_to(user: User | AnonymousUser) -> QuerySet[TeamQueuePolicy]:
    return _team_scoped(TeamQueuePolicy.objects.all(), user).select_related(
        "team", "cluster", "updated_by"
    )
