"""The audit trail: one ``AuditEvent`` per state change, with the changed row's audited fields
before and after. Every app's services record through ``audit``, inside the transaction of the
change, with an ``AuditEvent.Action``."""

import datetime
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Model

from tenants.models import QUOTA_AMOUNT_FIELDS, AuditEvent, Team

# What a quota request asks for and a grant gives (``QuotaAmounts``), and the state it is in.
_QUOTA_FIELDS = ["team_id", "cluster_id", *QUOTA_AMOUNT_FIELDS, "state"]

# The fields of each model that an event's before/after holds.
AUDITED_FIELDS = {
    "Team": ["slug", "name", "description", "archived_at", "external_services_allowed"],
    "Membership": ["team_id", "user_id", "role"],
    "User": ["username", "is_active"],
    "QuotaRequest": [*_QUOTA_FIELDS, "decision_note"],
    "QuotaGrant": _QUOTA_FIELDS,
    "Cluster": [
        "name",
        "overcommit_ratio",
        "quota_mode",
        "borrowers_share_by_weight",
        "fair_share_half_life_hours",
        "fair_share_usage_scale_gpu_hours",
        "borrower_min_runtime_seconds",
        "lender_wait_bound_seconds",
        "preemption_grace_seconds",
        "gpu_node_selector",
        "gpu_taint_key",
        "user_prefix",
        "allowed_registries",
        "allow_all_registries",
        "allowed_priority_classes",
        "reserved_namespaces",
        "object_limits",
        "apps_domain",
        "pod_security_level",
    ],
    "TeamObjectLimits": ["team_id", "cluster_id", "limits"],
    "TeamQueuePolicy": [
        "team_id",
        "cluster_id",
        "borrowing_limit",
        "lending_limit",
        "fair_sharing_weight",
    ],
    "Department": ["slug", "name", "parent_id"],
    "DepartmentCeiling": ["department_id", "cluster_id", "gpu_resource", "gpu_model", "gpus"],
    "GpuCapacity": ["cluster_id", "resource_name", "gpu_model", "allocatable", "admin_cap"],
    "Price": ["gpu_model", "gpu_hour", "cpu_core_hour", "memory_gib_hour", "effective_from"],
    "Budget": ["team_id", "department_id", "period", "gpu_model", "gpu_hours", "policy"],
}


def _json_value(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def snapshot(instance: Model) -> dict[str, Any]:
    """The audited fields of a row as JSON-safe values, for an audit event's before/after."""
    fields = AUDITED_FIELDS[type(instance).__name__]
    return {field: _json_value(getattr(instance, field)) for field in fields}


def audit(
    *,
    actor: User | None,
    action: AuditEvent.Action,
    target: Model,
    team: Team | None,
    before: dict | None,
    after: dict | None,
    note: str = "",
) -> AuditEvent:
    event = _event(actor, action, target, team, before, after, note)
    event.save(force_insert=True)
    return event


def save_audited(
    *,
    actor: User | None,
    instance: Model,
    action: AuditEvent.Action,
    team: Team | None,
    before: dict | None,
) -> bool:
    """Validate a new or changed row (``full_clean``), save it and record the change, inside the
    caller's transaction. ``before`` is the row's ``snapshot`` from before the change (None: a
    new row); a row whose audited fields are as they were is neither saved nor recorded, and the
    answer is False."""
    if before is not None and snapshot(instance) == before:
        return False
    instance.full_clean()
    instance.save()
    audit(
        actor=actor,
        action=action,
        target=instance,
        team=team,
        before=before,
        after=snapshot(instance),
    )
    return True


def audit_each(
    *,
    actor: User | None,
    action: AuditEvent.Action,
    team: Team | None,
    changes: Iterable[tuple[Model, dict | None, dict | None]],
) -> list[AuditEvent]:
    """``audit`` for many objects changed alike at once (a batch of jobs): one event per
    (target, before, after), written in one statement."""
    events = [
        _event(actor, action, target, team, before, after, "") for target, before, after in changes
    ]
    return AuditEvent.objects.bulk_create(events)


def _event(actor, action, target, team, before, after, note) -> AuditEvent:
    return AuditEvent(
        actor=actor,
        action=action,
        target_type=type(target).__name__,
        target_id=target.pk,
        team=team,
        before=before,
        after=after,
        note=note,
    )
