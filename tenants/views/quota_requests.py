"""A team lead's quota requests: the request form and cancelling a pending request."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusters.models import Cluster
from tenants import quota, review_history, selectors
from tenants.errors import InvalidTransition
from tenants.extensions import EXTENDS_PARAMETER, extension_initial
from tenants.forms import QuotaRequestForm, add_service_errors
from tenants.models import Team
from tenants.permissions import can_request_quota
from tenants.views.teams import visible_team


@login_required
def quota_request_new(request: HttpRequest, slug: str) -> HttpResponse:
    team = visible_team(request, slug)
    if not can_request_quota(request.user, team):
        raise PermissionDenied(f"Only leads of {team.slug} can request quota for it.")

    if request.method == "GET" and request.htmx and "cluster" in request.GET:
        # The cluster select changed: send back the GPU kind select for that cluster.
        cluster_id = request.GET["cluster"]
        cluster = Cluster.objects.filter(pk=cluster_id).first() if cluster_id.isdigit() else None
        form = QuotaRequestForm(cluster=cluster)
        return render(
            request,
            "tenants/_gpu_kind_field.html",
            {"field": form["gpu_resource"], "model_field": form["gpu_model"]},
        )

    history = None
    if request.method == "POST":
        form = QuotaRequestForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                quota_request = quota.quota_request_create(
                    requested_by=request.user,
                    team=team,
                    cluster=data["cluster"],
                    gpu_resource=data["gpu_resource"],
                    gpu_model=data["gpu_model"],
                    gpus=data["gpus"],
                    cpu_cores=data["cpu_cores"],
                    memory_gib=data["memory_gib"],
                    starts_on=data["starts_on"],
                    ends_on=data["ends_on"],
                    justification=data["justification"],
                )
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                what = quota_request.gpu_model or quota_request.gpu_resource
                messages.success(
                    request,
                    f"Requested {quota_request.gpus} × {what} on {quota_request.cluster}. An "
                    "admin will review it.",
                )
                return redirect("team-detail", slug=team.slug)
    else:
        form, history = _new_request_form(request, team)
    form.fields["cluster"].widget.attrs.update(
        {
            "hx-get": reverse("quota-request-new", args=[team.slug]),
            "hx-target": "#field-gpu_resource",
            "hx-swap": "outerHTML",
        }
    )
    return render(
        request,
        "tenants/quota_request_form.html",
        {"team": team, "form": form, "history": history},
    )


def _new_request_form(
    request: HttpRequest, team: Team
) -> tuple[QuotaRequestForm, review_history.GrantHistory | None]:
    """An empty request form, or with ``?extends=<grant id>`` (a grant of this team with an
    end) one prefilled to extend that grant, with what the team did with its grants of that
    kind: the figures and the suggestion the admin will see beside the request."""
    grant_id = request.GET.get(EXTENDS_PARAMETER, "")
    grant = (
        selectors.quota_grants_visible_to(request.user)
        .filter(pk=grant_id, team=team, ends_on__isnull=False)
        .first()
        if grant_id.isascii() and grant_id.isdigit()
        else None
    )
    if grant is None:
        return QuotaRequestForm(), None
    form = QuotaRequestForm(initial=extension_initial(grant), cluster=grant.cluster)
    (history,) = review_history.histories([review_history.ask_of(grant)])
    return form, history


@require_POST
@login_required
def quota_request_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    quota_request = get_object_or_404(selectors.quota_requests_visible_to(request.user), pk=pk)
    try:
        quota.quota_request_cancel(actor=request.user, quota_request=quota_request)
    except InvalidTransition as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Cancelled quota request #{quota_request.pk}.")
    return redirect("team-detail", slug=quota_request.team.slug)
