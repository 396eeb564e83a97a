"""Limits inside a team: what each member may hold at once on a cluster (``MemberLimit``), set
by the team's leads, and the check every new workload of a member passes.

A member's use is what their workloads hold: each workload kind that a person starts
(``gpujobs``: their unfinished jobs, ``interactive``: their sessions) registers, in its
``AppConfig.ready``, a function giving one member's GPUs and workloads on a cluster; this
module never imports those apps (as ``workloads.holdings`` for the team's quota).

Beyond the limit, a job waits in the portal on a Kueue cluster (``gpujobs.member_holds``
releases it once the member is under again: ``room_made`` tells it when a session ends or a
limit changes) and is refused under quota only, as a session is
on either: ``over_limit`` says why, in words a member can act on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clusters.models import Cluster
from tenants.audit import audit
from tenants.models import AuditEvent, Membership, Team
from workloads.models import MemberLimit
from workloads.permissions import can_set_member_limits

MEMBER_LIMIT_REACHED = "Your limit in the team is reached"

# (team=, cluster=, user=) -> (GPUs held, workloads unfinished).
Counter = Callable[..., tuple[int, int]]

_counters: dict[str, Counter] = {}


def register(what: str, counter: Counter) -> None:
    """Count ``counter`` against members' limits, named ``what`` in messages ("jobs")."""
    _counters[what] = counter


# (team_id=, cluster_id=, user_id=) -> None: sends what waits for the member's limit, if any.
Releaser = Callable[..., None]

_releasers: list[Releaser] = []


def register_releaser(release: Releaser) -> None:
    """Be told when a member may have room again (``gpujobs.member_holds``)."""
    _releasers.append(release)


def room_made(*, team_id: int, cluster_id: int, user_id: int) -> None:
    """A member's session ended or their limit changed: what waits for the limit may go. Call
    inside the transaction of the change."""
    for release in _releasers:
        release(team_id=team_id, cluster_id=cluster_id, user_id=user_id)


@dataclass(frozen=True)
class MemberUse:
    gpus: int = 0
    running: int = 0

    def words(self) -> str:
        return f"{self.gpus} GPU{'' if self.gpus == 1 else 's'} in {self.running} running"


def member_use(*, team: Team, cluster: Cluster, user: User) -> MemberUse:
    """What the member's jobs and sessions hold on the cluster now."""
    gpus = running = 0
    for counter in _counters.values():
        held, count = counter(team=team, cluster=cluster, user=user)
        gpus += held
        running += count
    return MemberUse(gpus=gpus, running=running)


def limit_of(*, team: Team, cluster: Cluster, user: User) -> MemberLimit | None:
    return MemberLimit.objects.filter(team=team, cluster=cluster, user=user).first()


def over_limit(
    *,
    team: Team,
    cluster: Cluster,
    user: User,
    gpus: int,
    use: MemberUse,
    limit: MemberLimit | None,
    before: MemberUse = MemberUse(),
) -> str | None:
    """Why the member may not start one more workload of ``gpus`` GPUs now (None: they may),
    given their ``limit`` (None: no limit), what they hold (``use``: ``member_use``) and what a
    batch asks for ahead of this one (``before``). The caller holds the team's row lock, as
    for the quota check."""
    if limit is None:
        return None
    held, running = use.gpus + before.gpus, use.running + before.running
    name = user.get_username()
    if limit.max_running is not None and running + 1 > limit.max_running:
        return (
            f"{MEMBER_LIMIT_REACHED}: {name} may run {limit.max_running} job"
            f"{'' if limit.max_running == 1 else 's'} or session"
            f"{'' if limit.max_running == 1 else 's'} at once on {cluster.name} (a limit set "
            f"by the leads of {team.slug}) and has {running} unfinished."
        )
    if limit.max_gpus is not None and held + gpus > limit.max_gpus:
        return (
            f"{MEMBER_LIMIT_REACHED}: {name} may hold {limit.max_gpus} GPU"
            f"{'' if limit.max_gpus == 1 else 's'} at once on {cluster.name} (a limit set by "
            f"the leads of {team.slug}), holds {held} and this asks for {gpus}."
        )
    return None


def check_member_limit(
    *, team: Team, cluster: Cluster, user: User, gpus: int, field: str = "gpus"
) -> None:
    """Refuse (400 on ``field``) one more workload of the member beyond their limit: a session,
    or a job under quota only."""
    limit = limit_of(team=team, cluster=cluster, user=user)
    if limit is None:
        return
    use = member_use(team=team, cluster=cluster, user=user)
    reason = over_limit(team=team, cluster=cluster, user=user, gpus=gpus, use=use, limit=limit)
    if reason is not None:
        raise ValidationError({field: reason})


def _snapshot(limit: MemberLimit) -> dict:
    return {
        "user": limit.user.get_username(),
        "cluster": limit.cluster.name,
        "max_gpus": limit.max_gpus,
        "max_running": limit.max_running,
    }


def _check_may_set(actor: User, team: Team) -> None:
    if not can_set_member_limits(actor, team):
        raise PermissionDenied(f"Only leads of {team.slug} can set its members' limits.")


def member_limit_set(
    *,
    actor: User,
    team: Team,
    user: User,
    cluster: Cluster,
    max_gpus: int | None,
    max_running: int | None,
) -> MemberLimit:
    """Set (or change) a member's limit on a cluster; audited."""
    _check_may_set(actor, team)
    errors = {}
    role = Membership.objects.filter(team=team, user=user).values_list("role", flat=True).first()
    if role not in (Membership.Role.LEAD, Membership.Role.MEMBER):
        errors["user"] = (
            f"{user.get_username()} does not run work in {team.slug}: only its leads and "
            "members have limits."
        )
    if max_gpus is None and max_running is None:
        errors["max_gpus"] = "Give a limit of GPUs, of running workloads, or both."
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        limit = (
            MemberLimit.objects.select_for_update()
            .filter(team=team, user=user, cluster=cluster)
            .first()
        )
        before = _snapshot(limit) if limit else None
        if limit is None:
            limit = MemberLimit(team=team, user=user, cluster=cluster)
        limit.max_gpus, limit.max_running, limit.set_by = max_gpus, max_running, actor
        limit.save()
        room_made(team_id=team.pk, cluster_id=cluster.pk, user_id=user.pk)
        audit(
            actor=actor,
            action=AuditEvent.Action.MEMBER_LIMIT_SET,
            target=limit,
            team=team,
            before=before,
            after=_snapshot(limit),
        )
    return limit


def member_limit_remove(*, actor: User, limit: MemberLimit) -> None:
    """Lift a member's limit; audited. Their jobs waiting for it are released after commit."""
    _check_may_set(actor, limit.team)
    with transaction.atomic():
        before = _snapshot(limit)
        audit(
            actor=actor,
            action=AuditEvent.Action.MEMBER_LIMIT_REMOVED,
            target=limit,
            team=limit.team,
            before=before,
            after=None,
        )
        room_made(team_id=limit.team_id, cluster_id=limit.cluster_id, user_id=limit.user_id)
        limit.delete()


@dataclass(frozen=True)
class LimitRow:
    limit: MemberLimit
    use: MemberUse


def team_limits(team: Team) -> list[LimitRow]:
    """The team's member limits, each with the member's use now (for the team page: a handful
    of rows, two counts each)."""
    limits = MemberLimit.objects.filter(team=team).select_related("user", "cluster", "set_by")
    return [
        LimitRow(limit, member_use(team=team, cluster=limit.cluster, user=limit.user))
        for limit in limits.order_by("user__username", "cluster__name")
    ]
