"""Department ceilings: how many GPUs of a model on a cluster a department's teams hold against
its ceiling, and whether a department admin may decide a quota request (delegated approval).

Delegation never widens what a portal admin would allow: a department admin decides only the
requests of teams in a department they administer (nested ones included), never their own, and
only while approving keeps every department above the team within its ceiling, one of them
administered by them. Anything else is for portal admins, and ``Delegation.reason`` says why,
with the arithmetic.
"""

import datetime
from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, Sum
from django.utils import timezone

from tenants import department_tree
from tenants.models import Department, DepartmentCeiling, QuotaGrant, QuotaRequest, Team
from tenants.selectors import department_parents, grants_overlapping


@dataclass(frozen=True)
class CeilingCheck:
    """One department's ceiling against what its teams (nested departments' included) hold
    during a period, and what a request would add."""

    department: Department
    ceiling: int
    granted: int
    gpus: int

    @property
    def after(self) -> int:
        return self.granted + self.gpus

    @property
    def holds(self) -> bool:
        return self.after <= self.ceiling

    @property
    def arithmetic(self) -> str:
        text = (
            f"{self.department.slug}: {self.granted} granted + {self.gpus} requested = "
            f"{self.after} of its ceiling of {self.ceiling}"
        )
        if not self.holds:
            text += f", over by {self.after - self.ceiling}"
        return text


@dataclass(frozen=True)
class Delegation:
    """Whether a department admin may decide a request; ``reason`` says why (not) in words."""

    allowed: bool
    reason: str
    checks: tuple[CeilingCheck, ...] = ()


def ceiling_checks(
    *,
    team: Team,
    cluster_id: int,
    gpu_resource: str,
    gpu_model: str,
    gpus: int,
    starts_on: datetime.date,
    ends_on: datetime.date | None,
) -> list[CeilingCheck]:
    """Each ceiling on this GPU model of the cluster set by the team's department or one above
    it, from the team's department up: the active grants of the ceiling department's teams that
    overlap the period, as the capacity check counts them (summed, erring on the safe side)."""
    if team.department_id is None or not gpu_model:
        return []
    parents = department_parents()
    up = department_tree.chain(team.department_id, parents)
    ceilings = {
        c.department_id: c
        for c in DepartmentCeiling.objects.filter(
            department_id__in=up,
            cluster_id=cluster_id,
            gpu_resource=gpu_resource,
            gpu_model=gpu_model,
        ).select_related("department", "cluster")
    }
    checks = []
    for department_id in up:
        ceiling = ceilings.get(department_id)
        if ceiling is None:
            continue
        granted = (
            grants_overlapping(
                cluster=ceiling.cluster,
                gpu_resource=gpu_resource,
                gpu_model=gpu_model,
                starts_on=starts_on,
                ends_on=ends_on,
            )
            .filter(team__department_id__in=department_tree.subtree(department_id, parents))
            .aggregate(total=Sum("gpus"))["total"]
            or 0
        )
        checks.append(
            CeilingCheck(
                department=ceiling.department, ceiling=ceiling.gpus, granted=granted, gpus=gpus
            )
        )
    return checks


def delegation(
    *,
    reviewer: User | AnonymousUser,
    quota_request: QuotaRequest,
    gpus: int | None = None,
    ends_on: datetime.date | None = None,
) -> Delegation:
    """Whether ``reviewer``, as a department admin, may decide the request (approving ``gpus``
    until ``ends_on``: by default what it asks for). Says nothing of portal admins, who decide
    any request but their own (``quota_checks.check_can_decide``)."""
    team = quota_request.team
    if quota_request.requested_by_id == reviewer.pk:
        return Delegation(False, "You cannot decide on a quota request you made yourself.")
    up = (
        department_tree.chain(team.department_id, department_parents())
        if team.department_id is not None
        else []
    )
    mine = set(reviewer.administered_departments.filter(pk__in=up).values_list("pk", flat=True))
    if not mine:
        return Delegation(
            False,
            f"Team {team.slug} is not in a department you administer: a portal admin decides.",
        )
    if not quota_request.gpu_model:
        return Delegation(
            False,
            "Needs a portal admin: the request names no GPU model, and department ceilings are "
            "per model.",
        )
    checks = ceiling_checks(
        team=team,
        cluster_id=quota_request.cluster_id,
        gpu_resource=quota_request.gpu_resource,
        gpu_model=quota_request.gpu_model,
        gpus=quota_request.gpus if gpus is None else gpus,
        starts_on=quota_request.starts_on,
        ends_on=quota_request.ends_on if ends_on is None else ends_on,
    )
    if not any(check.department.pk in mine for check in checks):
        return Delegation(
            False,
            f"Needs a portal admin: no department of yours above team {team.slug} has a ceiling "
            f"for {quota_request.gpu_model} ({quota_request.gpu_resource}) on "
            f"{quota_request.cluster.name}.",
            tuple(checks),
        )
    over = [check for check in checks if not check.holds]
    if over:
        return Delegation(
            False,
            "Needs a portal admin: approving would exceed the ceiling ("
            + "; ".join(check.arithmetic for check in over)
            + ").",
            tuple(checks),
        )
    return Delegation(
        True,
        "Within the ceiling (" + "; ".join(check.arithmetic for check in checks) + ").",
        tuple(checks),
    )


@dataclass(frozen=True)
class DepartmentQuotaRow:
    """GPUs of one model on one cluster that the department's teams hold today, against its
    ceiling there (None: no ceiling)."""

    cluster: str
    gpu_resource: str
    gpu_model: str
    granted: int
    ceiling: int | None

    @property
    def free(self) -> int | None:
        return None if self.ceiling is None else self.ceiling - self.granted


def department_quota(
    department: Department, *, today: datetime.date | None = None
) -> list[DepartmentQuotaRow]:
    """What the department's teams (nested departments' included) hold today per cluster and GPU
    model, beside each ceiling; in two queries."""
    today = today or timezone.localdate()
    ids = department_tree.subtree(department.pk, department_parents())
    granted = {
        (row["cluster__name"], row["gpu_resource"], row["gpu_model"]): row["total"]
        for row in QuotaGrant.objects.filter(
            Q(ends_on__isnull=True) | Q(ends_on__gte=today),
            team__department_id__in=ids,
            state=QuotaGrant.State.ACTIVE,
            starts_on__lte=today,
        )
        .values("cluster__name", "gpu_resource", "gpu_model")
        .annotate(total=Sum("gpus"))
    }
    ceilings = {
        (c.cluster.name, c.gpu_resource, c.gpu_model): c.gpus
        for c in department.ceilings.select_related("cluster")
    }
    return [
        DepartmentQuotaRow(
            cluster=key[0],
            gpu_resource=key[1],
            gpu_model=key[2],
            granted=granted.get(key, 0),
            ceiling=ceilings.get(key),
        )
        for key in sorted(set(granted) | set(ceilings))
    ]
