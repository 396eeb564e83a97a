"""The rules a layout request must pass before it is written: what a lead may ask for, and the
state changes a layout may go through. Each raises (``ValidationError`` naming every bad field,
or ``InvalidTransition``) and writes nothing."""

import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Sum

from clusters.mig_profiles import profiles_for
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from sharing.layouts import MIG, REPLICAS, SHARED
from sharing.models import LayoutRequest
from tenants.errors import InvalidTransition
from tenants.models import QuotaGrant, Team

State = LayoutRequest.State

TRANSITIONS: dict[str, set[str]] = {
    State.PENDING: {State.APPROVED, State.REJECTED, State.CANCELLED},
    State.APPROVED: {State.APPLYING},
    State.APPLYING: {State.APPLIED, State.FAILED},
    State.APPLIED: {State.REVERTING},
    State.REVERTING: {State.REVERTED},
}
VERBS = {
    State.APPROVED: "approve",
    State.REJECTED: "reject",
    State.CANCELLED: "cancel",
    State.APPLYING: "apply",
    State.APPLIED: "finish applying",
    State.FAILED: "fail",
    State.REVERTING: "revert",
    State.REVERTED: "finish reverting",
}
# The layouts that still hold (or will hold) GPUs of their source grant.
OPEN_STATES = (State.PENDING, State.APPROVED, State.APPLYING)


def check_transition(layout: LayoutRequest, to_state: str) -> None:
    if to_state not in TRANSITIONS.get(layout.state, set()):
        raise InvalidTransition(
            f"Cannot {VERBS[to_state]} sharing layout #{layout.pk}: it is {layout.state}.",
            current_state=layout.state,
        )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def converting_elsewhere(grant: QuotaGrant, *, exclude: int | None = None) -> int:
    """GPUs of the grant that open layout requests (not yet applied) already ask to convert."""
    open_layouts = LayoutRequest.objects.filter(source_grant=grant, state__in=OPEN_STATES)
    if exclude is not None:
        open_layouts = open_layouts.exclude(pk=exclude)
    return open_layouts.aggregate(total=Sum("gpus"))["total"] or 0


def source_grant_errors(team: Team, grant: QuotaGrant, *, today: datetime.date) -> str | None:
    """Why the grant cannot be the source of a layout of the team, in words (None: it can)."""
    if grant.team_id != team.pk:
        return f"Grant #{grant.pk} is not one of {team.slug}'s grants."
    if grant.state != QuotaGrant.State.ACTIVE:
        return f"Grant #{grant.pk} is {grant.state}; only an active grant can be converted."
    if grant.starts_on > today:
        return f"Grant #{grant.pk} starts on {grant.starts_on.isoformat()}; convert it from then."
    if grant.gpu_resource != DEFAULT_GPU_RESOURCE:
        return (
            f"Grant #{grant.pk} is of {grant.gpu_resource}; only whole GPUs "
            f"({DEFAULT_GPU_RESOURCE}) can be converted."
        )
    if not grant.gpu_model:
        return (
            f"Grant #{grant.pk} is of any GPU model; only a grant of one model can be converted "
            "(a layout changes nodes of that model)."
        )
    return None


def check_new_layout(
    *,
    team: Team,
    source_grant: QuotaGrant,
    gpus: Any,
    kind: str,
    mig_profile: str,
    replicas: Any,
    ends_on: datetime.date | None,
    justification: str,
    today: datetime.date,
) -> None:
    """Refuse what no admin could approve: one ValidationError naming every bad field."""
    errors: dict[str, str] = {}
    if team.archived_at is not None:
        errors["team"] = f"Team {team.slug} is archived."
    grant_error = source_grant_errors(team, source_grant, today=today)
    if grant_error:
        errors["source_grant"] = grant_error
    if not _whole(gpus) or gpus < 1:
        errors["gpus"] = "Must be a whole number of GPUs, at least 1."
    elif not grant_error:
        taken = converting_elsewhere(source_grant)
        free = source_grant.gpus - taken
        if gpus > free:
            errors["gpus"] = (
                f"Grant #{source_grant.pk} holds {source_grant.gpus} GPUs"
                + (f", {taken} of them in other layout requests," if taken else "")
                + f" so at most {max(free, 0)} can be converted; {gpus} were asked for."
            )
    if kind == MIG:
        profiles = profiles_for(source_grant.gpu_model)
        if not profiles:
            errors["mig_profile"] = f"{source_grant.gpu_model or 'This model'} has no MIG profiles."
        elif mig_profile not in profiles:
            errors["mig_profile"] = (
                f"Not a MIG profile of {source_grant.gpu_model}: {mig_profile!r}. Its profiles "
                f"are: {', '.join(profiles)}."
            )
        if replicas not in (None, ""):
            errors["replicas"] = "Only shared GPUs have replicas; leave it empty for MIG."
    elif kind == SHARED:
        if not _whole(replicas) or replicas not in REPLICAS:
            errors["replicas"] = (
                f"Must be one of {', '.join(map(str, REPLICAS))} replicas per GPU; "
                f"{replicas!r} was given."
            )
        if mig_profile:
            errors["mig_profile"] = "Only MIG layouts have a profile; leave it empty."
    else:
        errors["kind"] = f"Must be {MIG!r} (MIG slices) or {SHARED!r} (shared GPUs)."
    if ends_on is None:
        errors["ends_on"] = "Say until when (the layout is reverted after that day)."
    elif ends_on < today:
        errors["ends_on"] = f"Must not be in the past (today is {today.isoformat()})."
    elif not grant_error and source_grant.ends_on is not None and ends_on > source_grant.ends_on:
        errors["ends_on"] = (
            f"Must not be after grant #{source_grant.pk}'s end "
            f"({source_grant.ends_on.isoformat()})."
        )
    if not justification.strip():
        errors["justification"] = "Say what the slices are for."
    if errors:
        raise ValidationError(errors)
