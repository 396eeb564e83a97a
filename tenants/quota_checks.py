"""The rules a quota change must pass before it is written: allowed state transitions, what a
new request may ask for, who may decide on one, and whether the cluster's capacity holds a grant.

Each raises (``InvalidTransition``, ``ValidationError`` naming every bad field, or
``PermissionDenied``), or answers the bad fields for a caller that checks more of its own, and
writes nothing; ``services`` calls them before it changes a row.
"""

import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError

from clusters.models import Cluster, GpuCapacity, GpuModelCapacity
from tenants.ceilings import delegation
from tenants.errors import InvalidTransition
from tenants.models import MAX_CPU_CORES, MAX_MEMORY_GIB, QuotaGrant, QuotaRequest, Team
from tenants.permissions import administers_a_department, is_portal_admin
from tenants.selectors import granted_gpus, model_capacity, plannable_gpus

RequestState = QuotaRequest.State
GrantState = QuotaGrant.State

REQUEST_TRANSITIONS: dict[str, set[str]] = {
    RequestState.PENDING: {RequestState.APPROVED, RequestState.REJECTED, RequestState.CANCELLED},
}
GRANT_TRANSITIONS: dict[str, set[str]] = {
    GrantState.ACTIVE: {GrantState.ACTIVE, GrantState.EXPIRED, GrantState.REVOKED},
}


def check_transition(instance: QuotaRequest | QuotaGrant, to_state: str) -> None:
    table = REQUEST_TRANSITIONS if isinstance(instance, QuotaRequest) else GRANT_TRANSITIONS
    if to_state not in table.get(instance.state, set()):
        kind = "request" if isinstance(instance, QuotaRequest) else "grant"
        verb = {
            RequestState.APPROVED: "approve",
            RequestState.REJECTED: "reject",
            RequestState.CANCELLED: "cancel",
            GrantState.ACTIVE: "change",
            GrantState.EXPIRED: "expire",
            GrantState.REVOKED: "revoke",
        }[to_state]
        raise InvalidTransition(
            f"Cannot {verb} quota {kind} #{instance.pk}: it is {instance.state}.",
            current_state=instance.state,
        )


def check_new_quota_request(
    *,
    team: Team,
    cluster: Cluster,
    gpu_resource: str,
    gpus: int,
    starts_on: datetime.date,
    ends_on: datetime.date | None,
    cpu_cores: Decimal | None,
    memory_gib: int | None,
    justification: str,
    today: datetime.date,
    gpu_model: str = "",
) -> None:
    """Reject what no admin could grant: one ValidationError naming every bad field at once."""
    errors: dict[str, str] = {}
    if starts_on < today:
        errors["starts_on"] = f"Must not be in the past (today is {today.isoformat()})."
    if not justification.strip():
        errors["justification"] = "Say what the GPUs are for."
    max_gpus = settings.PORTAL_MAX_GPUS_PER_REQUEST
    if team.archived_at is not None:
        errors["team"] = f"Team {team.slug} is archived and cannot receive quota."
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        errors["gpus"] = "Must be a whole number of GPUs, at least 1."
    elif gpus > max_gpus:
        errors["gpus"] = f"At most {max_gpus} GPUs can be requested at once; {gpus} were asked for."
    offered = list(cluster.gpu_capacities.values_list("resource_name", flat=True))
    if gpu_resource not in offered:
        kinds = ", ".join(offered) or "none"
        errors["gpu_resource"] = (
            f"Cluster {cluster.name} has no GPUs of kind {gpu_resource!r}; it offers: {kinds}."
        )
    elif gpu_model:
        unknown = unknown_gpu_model(cluster=cluster, gpu_resource=gpu_resource, gpu_model=gpu_model)
        if unknown:
            errors["gpu_model"] = f"{unknown} Leave it empty for any model."
    if ends_on is not None and ends_on < starts_on:
        errors["ends_on"] = f"Must not be before the start date ({starts_on.isoformat()})."
    if cpu_cores is not None and not 0 <= cpu_cores <= MAX_CPU_CORES:
        errors["cpu_cores"] = f"Must be between 0 and {MAX_CPU_CORES:,} cores."
    if memory_gib is not None and not 0 <= memory_gib <= MAX_MEMORY_GIB:
        errors["memory_gib"] = f"Must be between 0 and {MAX_MEMORY_GIB:,} GiB."
    if errors:
        raise ValidationError(errors)


def unknown_gpu_model(*, cluster: Cluster, gpu_resource: str, gpu_model: str) -> str | None:
    """Why the model cannot be asked for or capped on the cluster, in words (None: some node of
    the cluster has it)."""
    models = list(
        GpuModelCapacity.objects.filter(cluster=cluster, resource_name=gpu_resource)
        .order_by("gpu_model")
        .values_list("gpu_model", flat=True)
    )
    if gpu_model in models:
        return None
    return (
        f"No node of cluster {cluster.name} has GPU model {gpu_model!r} ({gpu_resource}); its "
        f"models are: {', '.join(models) or 'none'}."
    )


def narrowing_errors(
    quota: QuotaRequest | QuotaGrant,
    *,
    gpus: Any,
    ends_on: datetime.date | None,
    whole: str,
    most: str,
    latest: str,
) -> dict[str, str]:
    """The bad fields, in words, of narrowing a request (approving it for less) or a grant
    (shrinking it) to ``gpus`` until ``ends_on`` (None: as they are): a whole number of GPUs
    from 1 (else ``whole``) to the ``quota``'s (else ``most``, which may name them as
    ``{gpus}``), an end from the ``quota``'s start to its end (else ``latest``, which may name
    that end as ``{ends_on}``)."""
    errors: dict[str, str] = {}
    if gpus is not None:
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
            errors["gpus"] = whole
        elif gpus > quota.gpus:
            errors["gpus"] = most.format(gpus=quota.gpus)
    if ends_on is not None:
        if ends_on < quota.starts_on:
            errors["ends_on"] = (
                f"Must not be before the start date ({quota.starts_on.isoformat()})."
            )
        elif quota.ends_on is not None and ends_on > quota.ends_on:
            errors["ends_on"] = latest.format(ends_on=quota.ends_on.isoformat())
    return errors


def check_can_decide(
    *,
    reviewer: User,
    quota_request: QuotaRequest,
    gpus: int | None = None,
    ends_on: datetime.date | None = None,
) -> None:
    """Portal admins decide any request but their own; a department admin only what
    ``ceilings.delegation`` allows (approving ``gpus`` until ``ends_on``, by default what the
    request asks for). For a department admin's approval, check again under the cluster's lock
    with what is granted, so two delegated approvals cannot both fit under one ceiling."""
    portal_admin = is_portal_admin(reviewer)
    if not portal_admin and not administers_a_department(reviewer):
        raise PermissionDenied("Only portal admins can approve or reject quota requests.")
    if quota_request.requested_by_id == reviewer.pk:
        raise PermissionDenied("You cannot decide on a quota request you made yourself.")
    if portal_admin:
        return
    verdict = delegation(reviewer=reviewer, quota_request=quota_request, gpus=gpus, ends_on=ends_on)
    if not verdict.allowed:
        raise PermissionDenied(verdict.reason)


def check_capacity(
    *,
    cluster: Cluster,
    gpu_resource: str,
    gpus: int,
    starts_on: datetime.date,
    ends_on: datetime.date | None,
    gpu_model: str = "",
) -> None:
    """Granted GPUs of this kind must stay within capacity times the overcommit ratio, and a
    grant of one model within that model's too (grants without a model count against the kind's
    total only).

    The caller must hold the lock on the cluster's row, or two approvals could both pass.
    """
    if gpu_model:
        _check_model_capacity(
            cluster=cluster,
            gpu_resource=gpu_resource,
            gpu_model=gpu_model,
            gpus=gpus,
            starts_on=starts_on,
            ends_on=ends_on,
        )
    capacity = GpuCapacity.objects.filter(cluster=cluster, resource_name=gpu_resource).first()
    total = capacity.capacity if capacity else 0
    plannable = plannable_gpus(total, cluster.overcommit_ratio)
    already = granted_gpus(
        cluster=cluster, gpu_resource=gpu_resource, starts_on=starts_on, ends_on=ends_on
    )
    if already + gpus > plannable:
        raise ValidationError(
            {
                "gpus": (
                    f"Not enough capacity: {cluster.name} can grant {plannable} × {gpu_resource} "
                    f"({total} at overcommit {cluster.overcommit_ratio}), {already} are already "
                    f"granted for that period, so at most {max(plannable - already, 0)} more; "
                    f"{gpus} would exceed it by {already + gpus - plannable}."
                )
            }
        )


def _check_model_capacity(
    *,
    cluster: Cluster,
    gpu_resource: str,
    gpu_model: str,
    gpus: int,
    starts_on: datetime.date,
    ends_on: datetime.date | None,
) -> None:
    total = model_capacity(cluster=cluster, gpu_resource=gpu_resource, gpu_model=gpu_model)
    plannable = plannable_gpus(total, cluster.overcommit_ratio)
    already = granted_gpus(
        cluster=cluster,
        gpu_resource=gpu_resource,
        gpu_model=gpu_model,
        starts_on=starts_on,
        ends_on=ends_on,
    )
    if already + gpus > plannable:
        raise ValidationError(
            {
                "gpus": (
                    f"Not enough {gpu_model} capacity: {cluster.name} can grant {plannable} × "
                    f"{gpu_model} ({total} at overcommit {cluster.overcommit_ratio}), {already} "
                    f"are already granted for that period, so at most "
                    f"{max(plannable - already, 0)} more; {gpus} would exceed it by "
                    f"{already + gpus - plannable}."
                )
            }
        )
