"""Changes to how a cluster queues work: its quota mode, and each team's queue policy there.
Admins only; validated first, audited, and brought to the cluster by the reconcile after commit
(as ``services`` does for quota).

Switching a cluster's mode asks for a pass over its cluster-wide objects and over every team on
it: to Kueue the passes create the flavors, priority classes and the teams' queues and raise each
ResourceQuota to its ceiling; back to quota only they delete them and lower the quotas to the
grants. Jobs are the job side's: a Job that waits suspended in a queue of a cluster that is now
quota only is let go by its resync (``gpujobs``), which reads the mode from the cluster's row.
"""

from decimal import Decimal, InvalidOperation

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clusters.models import Cluster, GpuCapacity, QuotaMode
from tenants.audit import audit, snapshot
from tenants.models import AuditEvent, Team, TeamQueuePolicy
from tenants.permissions import is_portal_admin
from tenants.reconcile_triggers import (
    request_cluster_reconcile_after_commit,
    request_reconcile_after_commit,
    request_reconcile_on_cluster_teams,
)

Action = AuditEvent.Action

MAX_FAIR_SHARING_WEIGHT = Decimal(1000)


def cluster_set_quota_mode(*, actor: User, cluster: Cluster, quota_mode: str) -> Cluster:
    """Enforce the cluster's grants with ResourceQuotas only, or with Kueue's queues."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change a cluster's quota mode.")
    if quota_mode not in QuotaMode.values:
        raise ValidationError(
            {"quota_mode": f"Must be one of: {', '.join(QuotaMode.values)} ({quota_mode!r})."}
        )
    # The cluster-wide objects (flavors, priority classes) follow the mode too.
    return _change_cluster(
        actor=actor,
        cluster=cluster,
        changes={"quota_mode": quota_mode},
        action=Action.CLUSTER_QUOTA_MODE_CHANGED,
        cluster_wide=True,
    )


# How a cluster's borrowers share idle GPUs and are preempted (``Cluster``'s fields).
BORROWING_FIELDS = (
    "borrowers_share_by_weight",
    "fair_share_half_life_hours",
    "fair_share_usage_scale_gpu_hours",
    "borrower_min_runtime_seconds",
    "lender_wait_bound_seconds",
    "preemption_grace_seconds",
)


def cluster_set_borrowing(*, actor: User, cluster: Cluster, **changes) -> Cluster:
    """How borrowers of the cluster's idle GPUs share them and are preempted: any of
    ``BORROWING_FIELDS``, checked by the fields' own rules (one ValidationError naming every bad
    field), audited as one change, and every team's queues made again."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change how a cluster's GPUs are borrowed.")
    errors: dict[str, list[str]] = {}
    for name, value in changes.items():
        if name not in BORROWING_FIELDS:
            raise TypeError(f"{name} is not a borrowing field")
        try:
            changes[name] = Cluster._meta.get_field(name).clean(value, cluster)
        except ValidationError as error:
            errors[name] = error.messages
    if errors:
        raise ValidationError(errors)
    return _change_cluster(
        actor=actor,
        cluster=cluster,
        changes=changes,
        action=Action.CLUSTER_BORROWING_CHANGED,
        cluster_wide=False,
    )


def _change_cluster(
    *, actor: User, cluster: Cluster, changes: dict, action: str, cluster_wide: bool
) -> Cluster:
    """Set some of the cluster's queueing fields, audited, and ask for a pass over every team
    on it (and over its cluster-wide objects with ``cluster_wide``); nothing when it has those
    values already. Under the cluster's row lock, as approvals take it: a grant approved during
    the change is reconciled before or after it, never half."""
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        changed = {f: v for f, v in changes.items() if getattr(locked, f) != v}
        if not changed:
            return locked
        before = snapshot(locked)
        for field, value in changed.items():
            setattr(locked, field, value)
        locked.save(update_fields=list(changed))
        audit(
            actor=actor,
            action=action,
            target=locked,
            team=None,
            before=before,
            after=snapshot(locked),
        )
        if cluster_wide:
            request_cluster_reconcile_after_commit(cluster_id=locked.pk)
        request_reconcile_on_cluster_teams(cluster_id=locked.pk)
    return locked


def cluster_gpus(cluster: Cluster) -> int:
    """Every GPU the cluster has to plan with, of every kind: what no limit can exceed."""
    return sum(row.capacity for row in GpuCapacity.objects.filter(cluster=cluster))


def check_queue_policy(
    *,
    team: Team,
    cluster: Cluster,
    borrowing_limit: int | None,
    lending_limit: int | None,
    fair_sharing_weight,
) -> Decimal:
    """One ValidationError naming every bad field; the weight as a Decimal when all is well."""
    errors: dict[str, str] = {}
    if team.archived_at is not None:
        errors["team"] = f"Team {team.slug} is archived: it has no queues to set."
    capacity = cluster_gpus(cluster)
    for field, value in (("borrowing_limit", borrowing_limit), ("lending_limit", lending_limit)):
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            errors[field] = "Must be a whole number of GPUs, 0 or more (empty: no limit)."
        elif value > capacity:
            errors[field] = (
                f"Must be at most the {capacity} GPUs cluster {cluster.name} has (empty: no limit)."
            )
    try:
        weight = Decimal(str(fair_sharing_weight))
    except (InvalidOperation, ValueError):
        weight = None
    if weight is None or not weight.is_finite():
        errors["fair_sharing_weight"] = "Must be a number above 0."
    elif weight <= 0 or weight > MAX_FAIR_SHARING_WEIGHT:
        errors["fair_sharing_weight"] = (
            f"Must be above 0 and at most {MAX_FAIR_SHARING_WEIGHT} ({weight} was given)."
        )
    elif weight != weight.quantize(Decimal("0.001")):
        errors["fair_sharing_weight"] = "At most three decimal places."
    if errors:
        raise ValidationError(errors)
    return weight.quantize(Decimal("0.001"))


def team_queue_policy_set(
    *,
    actor: User,
    team: Team,
    cluster: Cluster,
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
    fair_sharing_weight=Decimal(1),
) -> TeamQueuePolicy:
    """Set how many GPUs of each model the team may borrow on the cluster beyond its own quota
    (None: no limit), how many of its own it lends while idle (None: all) and its share of idle
    GPUs relative to other teams (weight). Takes effect in Kueue mode; kept in quota only mode
    for when the cluster switches."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can set a team's queue policy.")
    weight = check_queue_policy(
        team=team,
        cluster=cluster,
        borrowing_limit=borrowing_limit,
        lending_limit=lending_limit,
        fair_sharing_weight=fair_sharing_weight,
    )
    with transaction.atomic():
        policy = (
            TeamQueuePolicy.objects.select_for_update().filter(team=team, cluster=cluster).first()
        )
        before = snapshot(policy) if policy else None
        if policy is None:
            policy = TeamQueuePolicy(team=team, cluster=cluster)
        policy.borrowing_limit = borrowing_limit
        policy.lending_limit = lending_limit
        policy.fair_sharing_weight = weight
        policy.updated_by = actor
        policy.save()
        after = snapshot(policy)
        if before == after:
            return policy
        audit(
            actor=actor,
            action=Action.TEAM_QUEUE_POLICY_SET,
            target=policy,
            team=team,
            before=before,
            after=after,
        )
        request_reconcile_after_commit(team_id=team.pk, cluster_id=cluster.pk)
    return policy
