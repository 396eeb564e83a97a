"""What a team's ResourceQuota caps besides GPUs, CPU and memory: the objects a team may hold
(Jobs, pods, Services, ConfigMaps, Secrets, PersistentVolumeClaims) and the storage its claims
ask for. Built-in caps (``clusters.vocabulary.OBJECT_LIMIT_DEFAULTS``, pods from
``PORTAL_TEAM_MAX_PODS``), a cluster's own (``Cluster.object_limits``), and a team's on a
cluster, set by an admin here; ``reconcile.team_pass`` writes the result into the quota."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clusters.models import Cluster, object_limits_text, validate_object_limits
from clusters.vocabulary import OBJECT_LIMIT_DEFAULTS
from tenants.audit import audit, snapshot
from tenants.models import AuditEvent, Team, TeamObjectLimits
from tenants.permissions import is_portal_admin
from tenants.reconcile_triggers import request_reconcile_after_commit

Action = AuditEvent.Action


def team_object_limits_set(
    *, actor: User, team: Team, cluster: Cluster, limits: dict
) -> TeamObjectLimits | None:
    """Replace the team's own caps on the cluster (``limits``: only the resources changed; an
    empty mapping goes back to the cluster's caps), audited, and bring its quota in line."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change a team's object limits.")
    try:
        validate_object_limits(limits)
    except ValidationError as error:
        raise ValidationError({"limits": error.messages}) from error
    limits = object_limits_text(limits)
    with transaction.atomic():
        row = (
            TeamObjectLimits.objects.select_for_update().filter(team=team, cluster=cluster).first()
        )
        before = snapshot(row) if row else None
        if not limits:
            if row is not None:
                row.delete()
            after, row = None, None
        else:
            row = row or TeamObjectLimits(team=team, cluster=cluster)
            row.limits = limits
            row.updated_by = actor
            row.save()
            after = snapshot(row)
        if before == after:
            return row
        audit(
            actor=actor,
            action=Action.TEAM_OBJECT_LIMITS_SET,
            target=row or team,
            team=team,
            before=before,
            after=after,
        )
        request_reconcile_after_commit(team_id=team.pk, cluster_id=cluster.pk)
    return row


def merged_object_limits(cluster: Cluster, team_limits: dict | None) -> dict[str, str]:
    """What the team's quota on the cluster caps: the built-in caps, then the cluster's, then
    the team's own (``TeamObjectLimits.limits``)."""
    return {
        **OBJECT_LIMIT_DEFAULTS,
        **object_limits_text(cluster.object_limits or {}),
        **object_limits_text(team_limits or {}),
    }


def team_object_limits(*, team: Team, cluster: Cluster) -> dict[str, str]:
    row = TeamObjectLimits.objects.filter(team=team, cluster=cluster).first()
    return merged_object_limits(cluster, row.limits if row else None)
