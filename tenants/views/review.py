"""The admins' review queue, a page at a time: each pending request beside its cluster's
capacity, approve and reject, one by one or the ticked ones at once. A department admin's queue
holds their departments' teams' requests, each saying whether they may decide it or it needs a
portal admin (``tenants.ceilings``), with the ceiling's arithmetic."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.params import page_of
from tenants import quota, review_history, selectors
from tenants.ceilings import Delegation, delegation
from tenants.errors import InvalidTransition
from tenants.filtersets import QuotaRequestFilter
from tenants.forms import ApproveForm, BulkDecisionForm, RejectForm, add_service_errors
from tenants.models import QuotaRequest, Team
from tenants.permissions import can_review_quota, is_portal_admin

# Requests a page of the queue shows: its size and time do not grow with the queue.
REVIEW_PAGE_SIZE = 25


@dataclass
class ReviewRow:
    request: QuotaRequest
    summary: selectors.CapacitySummary | None
    approve_form: ApproveForm
    reject_form: RejectForm
    own: bool
    models: list[selectors.ModelCapacitySummary]
    in_period: selectors.GrantedInPeriod
    delegation: Delegation | None = None  # for a department admin: may they decide it?
    history: review_history.GrantHistory | None = None  # what it did with its past grants

    @property
    def decidable(self) -> bool:
        return not self.own and (self.delegation is None or self.delegation.allowed)

    @property
    def free_after(self) -> int | None:
        if self.summary is None:
            return None
        return self.summary.free_after(
            gpus=self.request.gpus, granted_in_period=self.in_period.kind
        )

    @property
    def model_summary(self) -> selectors.ModelCapacitySummary | None:
        """The requested model's figures (None for a request of any model)."""
        return next((m for m in self.models if m.gpu_model == self.request.gpu_model), None)

    @property
    def model_free_after(self) -> int | None:
        if not self.request.gpu_model:
            return None
        summary = self.model_summary
        plannable = summary.plannable if summary else 0
        return plannable - self.in_period.model - self.request.gpus


def _require_reviewer(request: HttpRequest) -> None:
    """Portal admins, and department admins for their departments' teams."""
    if not can_review_quota(request.user):
        raise PermissionDenied("Only portal admins can review quota requests.")


def _render_review(
    request: HttpRequest,
    *,
    bound_id: int | None = None,
    approve_form: ApproveForm | None = None,
    reject_form: RejectForm | None = None,
    bulk_form: BulkDecisionForm | None = None,
) -> HttpResponse:
    """A page of the queue, oldest first (filtered as the API's review queue is), each request
    beside its cluster's capacity for that GPU kind; a form that failed is shown again, bound,
    with its errors."""
    portal_admin = is_portal_admin(request.user)
    teams = (
        selectors.teams_visible_to(request.user)
        if portal_admin
        else Team.objects.filter(
            department_id__in=selectors.administered_department_ids(request.user)
        )
    )
    filterset = QuotaRequestFilter(
        request.GET,
        queryset=selectors.review_queue_of(request.user),
        request=request,
        teams=teams.order_by("name", "slug"),
    )
    page = page_of(request, filterset.page_rows(), REVIEW_PAGE_SIZE)
    summaries = selectors.capacity_summaries()
    model_summaries = selectors.model_capacity_summaries()
    in_period = selectors.granted_in_request_periods(page.object_list)
    histories = review_history.histories([review_history.ask_of(r) for r in page.object_list])
    rows = []
    for quota_request, history in zip(page.object_list, histories, strict=True):
        mine = quota_request.pk == bound_id
        kind = (quota_request.cluster_id, quota_request.gpu_resource)
        rows.append(
            ReviewRow(
                request=quota_request,
                summary=summaries.get(kind),
                models=model_summaries.get(kind, []),
                in_period=in_period[quota_request.pk],
                approve_form=(approve_form if mine and approve_form else None)
                or ApproveForm(prefix=f"approve-{quota_request.pk}"),
                reject_form=(reject_form if mine and reject_form else None)
                or RejectForm(prefix=f"reject-{quota_request.pk}"),
                own=quota_request.requested_by_id == request.user.pk,
                delegation=None
                if portal_admin
                else delegation(reviewer=request.user, quota_request=quota_request),
                history=history,
            )
        )
    return render(
        request,
        "tenants/review_queue.html",
        {
            "rows": rows,
            "page": page,
            "bound_id": bound_id,
            "filter_form": filterset.form,
            "bulk_form": bulk_form or BulkDecisionForm(requests=QuotaRequest.objects.none()),
        },
    )


@login_required
def review_queue(request: HttpRequest) -> HttpResponse:
    _require_reviewer(request)
    return _render_review(request)


@require_POST
@login_required
def review_decide(request: HttpRequest) -> HttpResponse:
    """Approve or reject the ticked requests, oldest first, each on its own (``quota.
    quota_requests_decide``); back to the queue, its filters kept, with a message per refusal."""
    _require_reviewer(request)
    # A department admin ticks among their teams' requests only: another's id is not a choice.
    form = BulkDecisionForm(
        request.POST,
        requests=selectors.quota_requests_visible_to(request.user).order_by("created_at", "id"),
    )
    if not form.is_valid():
        return _render_review(request, bulk_form=form)
    approve = form.cleaned_data["decision"] == BulkDecisionForm.APPROVE
    decisions = quota.quota_requests_decide(
        reviewer=request.user,
        quota_requests=list(form.cleaned_data["requests"]),
        approve=approve,
        note=form.cleaned_data["note"],
    )
    verb = "approved" if approve else "rejected"
    decided = [f"#{d.quota_request.pk}" for d in decisions if d.error is None]
    if decided:
        messages.success(
            request,
            f"{verb.capitalize()} {len(decided)} request{pluralize(len(decided))}: "
            f"{', '.join(decided)}.",
        )
    for decision in decisions:
        if decision.error is not None:
            messages.error(request, f"#{decision.quota_request.pk} not {verb}: {decision.error}")
    query = request.GET.copy()
    query.pop("page", None)  # the page it was on may be gone now
    return redirect(reverse("review-queue") + (f"?{query.urlencode()}" if query else ""))


def _visible_request(request: HttpRequest, pk: int) -> QuotaRequest:
    return get_object_or_404(selectors.quota_requests_visible_to(request.user), pk=pk)


def _decide(
    request: HttpRequest,
    pk: int,
    *,
    form: ApproveForm | RejectForm,
    decide: Callable[[dict], Any],
    done: Callable[[Any], str],
    form_name: str,
) -> HttpResponse:
    """One decision from its form: ``decide(cleaned_data)`` (a ``quota`` service), then back to
    the queue with ``done(what it answered)``, or with the refusal of a request decided
    meanwhile; a form or a decision with bad fields is shown again on the queue, bound, as
    ``form_name``."""
    if form.is_valid():
        try:
            decided = decide(form.cleaned_data)
        except ValidationError as error:
            add_service_errors(form, error)
        except InvalidTransition as error:
            messages.error(request, str(error))
            return redirect("review-queue")
        else:
            messages.success(request, done(decided))
            return redirect("review-queue")
    _require_reviewer(request)
    return _render_review(request, bound_id=pk, **{form_name: form})


@require_POST
@login_required
def quota_request_approve(request: HttpRequest, pk: int) -> HttpResponse:
    quota_request = _visible_request(request, pk)
    return _decide(
        request,
        pk,
        form=ApproveForm(request.POST, prefix=f"approve-{pk}"),
        decide=lambda data: quota.quota_request_approve(
            reviewer=request.user,
            quota_request=quota_request,
            gpus=data["gpus"],
            ends_on=data["ends_on"],
            note=data["note"],
        ),
        done=lambda grant: (
            f"Approved request #{quota_request.pk}: {quota_request.team} has "
            f"{grant.gpus} × {grant.gpu_resource} on {grant.cluster}."
        ),
        form_name="approve_form",
    )


@require_POST
@login_required
def quota_request_reject(request: HttpRequest, pk: int) -> HttpResponse:
    quota_request = _visible_request(request, pk)
    return _decide(
        request,
        pk,
        form=RejectForm(request.POST, prefix=f"reject-{pk}"),
        decide=lambda data: quota.quota_request_reject(
            reviewer=request.user, quota_request=quota_request, note=data["note"]
        ),
        done=lambda rejected: f"Rejected request #{quota_request.pk}.",
        form_name="reject_form",
    )
