"""A quota grant's page: its history, revoke and shrink, each with a preview of what it would
do to the team's running work (``tenants.impact``)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from tenants import impact, quota, selectors
from tenants.errors import InvalidTransition
from tenants.forms import RevokeForm, ShrinkForm, add_service_errors
from tenants.models import QuotaGrant
from tenants.permissions import is_portal_admin
from tenants.views.audit import describe_events


def _render_grant(
    request: HttpRequest,
    grant: QuotaGrant,
    *,
    revoke_form: RevokeForm | None = None,
    shrink_form: ShrinkForm | None = None,
    preview: bool = False,
) -> HttpResponse:
    history = list(
        selectors.audit_events_visible_to(request.user)
        .filter(
            Q(target_type="QuotaGrant", target_id=grant.pk)
            | Q(target_type="QuotaRequest", target_id=grant.request_id)
        )
        .order_by("created_at", "id")
    )
    describe_events(history)
    can_act = is_portal_admin(request.user) and grant.state == QuotaGrant.State.ACTIVE
    shrink_form = shrink_form or ShrinkForm(prefix="shrink")
    shrink_impact = _shrink_impact(grant, shrink_form) if can_act and preview else None
    return render(
        request,
        "tenants/grant_detail.html",
        {
            "grant": grant,
            "history": history,
            "can_act": can_act,
            "revoke_form": revoke_form or RevokeForm(prefix="revoke"),
            "shrink_form": shrink_form,
            "revoke_impact": impact.grant_change_impact(grant=grant) if can_act else None,
            "shrink_impact": shrink_impact,
            "impact_rule": impact.RULE,
        },
    )


def _shrink_impact(grant: QuotaGrant, form: ShrinkForm) -> impact.Impact | None:
    """The preview of the shrink the form describes, or None with the form's errors saying why
    there is none."""
    if not form.is_valid():
        return None
    gpus, ends_on = form.cleaned_data["gpus"], form.cleaned_data["ends_on"]
    if gpus is None and ends_on is None:
        form.add_error(None, "Give fewer GPUs or an earlier end to preview the shrink.")
        return None
    if gpus is not None and not 1 <= gpus <= grant.gpus:
        form.add_error("gpus", f"Give 1 to {grant.gpus} GPUs (revoke to end the grant).")
        return None
    today = timezone.localdate()
    after = impact.gpus_after_shrink(grant=grant, gpus=gpus, ends_on=ends_on, today=today)
    return impact.grant_change_impact(grant=grant, new_gpus=after, today=today)


def _visible_grant(request: HttpRequest, pk: int) -> QuotaGrant:
    return get_object_or_404(selectors.quota_grants_visible_to(request.user), pk=pk)


@login_required
def grant_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _render_grant(request, _visible_grant(request, pk))


@require_POST
@login_required
def grant_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    grant = _visible_grant(request, pk)
    form = RevokeForm(request.POST, prefix="revoke")
    if form.is_valid():
        try:
            quota.quota_grant_revoke(
                actor=request.user, grant=grant, note=form.cleaned_data["note"]
            )
        except InvalidTransition as error:
            messages.error(request, str(error))
        except ValidationError as error:
            add_service_errors(form, error)
            return _render_grant(request, grant, revoke_form=form)
        else:
            messages.success(request, f"Revoked grant #{grant.pk}.")
        return redirect("grant-detail", pk=grant.pk)
    return _render_grant(request, grant, revoke_form=form)


@require_POST
@login_required
def grant_shrink(request: HttpRequest, pk: int) -> HttpResponse:
    grant = _visible_grant(request, pk)
    form = ShrinkForm(request.POST, prefix="shrink")
    if "preview" in request.POST:
        # The form's "Preview impact" button: the page again, with what this shrink would do.
        return _render_grant(request, grant, shrink_form=form, preview=True)
    if form.is_valid():
        try:
            shrunk = quota.quota_grant_shrink(
                actor=request.user,
                grant=grant,
                gpus=form.cleaned_data["gpus"],
                ends_on=form.cleaned_data["ends_on"],
                note=form.cleaned_data["note"],
            )
        except InvalidTransition as error:
            messages.error(request, str(error))
        except ValidationError as error:
            add_service_errors(form, error)
            return _render_grant(request, grant, shrink_form=form)
        else:
            until = shrunk.ends_on.isoformat() if shrunk.ends_on else "open-ended"
            messages.success(
                request, f"Grant #{grant.pk} is now {shrunk.gpus} × {shrunk.gpu_resource}, {until}."
            )
        return redirect("grant-detail", pk=grant.pk)
    return _render_grant(request, grant, shrink_form=form)
