"""Sharing layout pages: a lead's request form (which previews what the layout makes), the
team's layouts with their progress, and the admins' review of pending layouts with what each
changes on its cluster."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.params import page_of
from sharing import selectors, services
from sharing.filtersets import LayoutFilter
from sharing.forms import LayoutForm, NoteForm
from sharing.layouts import LayoutShape
from sharing.permissions import can_decide_layouts, can_request_layout
from sharing.preview import previews
from tenants.errors import InvalidTransition
from tenants.forms import add_service_errors
from tenants.views.teams import visible_team

PAGE_SIZE = 25


@login_required
def layout_list(request: HttpRequest, slug: str) -> HttpResponse:
    team = visible_team(request, slug)
    filterset = LayoutFilter(request.GET, queryset=selectors.layouts_of_team(team), request=request)
    page = page_of(request, filterset.page_rows(), PAGE_SIZE)
    return render(
        request,
        "sharing/layout_list.html",
        {
            "team": team,
            "page": page,
            "filter_form": filterset.form,
            "can_request": can_request_layout(request.user, team) and not team.archived_at,
        },
    )


def _preview(form: LayoutForm) -> str:
    """What the form's layout would make, in words ("" until the form says enough)."""
    data = form.cleaned_data
    grant = data.get("source_grant")
    if grant is None or not data.get("gpus") or not data.get("kind"):
        return ""
    shape = LayoutShape(
        kind=data["kind"],
        gpu_model=grant.gpu_model,
        gpus=data["gpus"],
        mig_profile=data.get("mig_profile") or "",
        replicas=data.get("replicas"),
    )
    return shape.summary(data.get("ends_on")) if shape.slices else ""


@login_required
def layout_new(request: HttpRequest, slug: str) -> HttpResponse:
    team = visible_team(request, slug)
    if not can_request_layout(request.user, team):
        raise PermissionDenied(f"Only leads of {team.slug} can ask for a sharing layout.")
    grants = selectors.convertible_grants(team)
    preview = ""
    if request.method == "POST":
        form = LayoutForm(request.POST, grants=grants)
        if form.is_valid():
            data = form.cleaned_data
            try:
                layout = services.layout_create(
                    requested_by=request.user,
                    team=team,
                    source_grant=data["source_grant"],
                    gpus=data["gpus"],
                    kind=data["kind"],
                    mig_profile=data["mig_profile"] if data["kind"] == "mig" else "",
                    replicas=data["replicas"] if data["kind"] == "shared" else None,
                    ends_on=data["ends_on"],
                    justification=data["justification"],
                )
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                messages.success(
                    request,
                    f"Asked for sharing layout #{layout.pk}: {layout.gpus} × {layout.gpu_model} "
                    f"→ {layout.describe}. An admin will review it.",
                )
                return redirect("sharing-layout-list", slug=team.slug)
        preview = _preview(form) if hasattr(form, "cleaned_data") else ""
    elif "source_grant" in request.GET:
        # "Preview": the form as given, what it would become, and no errors until submitted.
        form = LayoutForm(request.GET, grants=grants)
        form.is_valid()
        preview = _preview(form)
        form = LayoutForm(initial=request.GET.dict(), grants=grants)
    else:
        form = LayoutForm(grants=grants, initial={"source_grant": request.GET.get("grant")})
    return render(
        request,
        "sharing/layout_form.html",
        {"team": team, "form": form, "preview": preview, "has_grants": grants.exists()},
    )


@require_POST
@login_required
def layout_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    layout = get_object_or_404(selectors.layouts_visible_to(request.user), pk=pk)
    try:
        services.layout_cancel(actor=request.user, layout=layout)
    except InvalidTransition as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Cancelled sharing layout #{layout.pk}.")
    return redirect("sharing-layout-list", slug=layout.team.slug)


def _require_admin(request: HttpRequest) -> None:
    if not can_decide_layouts(request.user):
        raise PermissionDenied("Only portal admins review sharing layouts.")


def _render_review(request: HttpRequest, *, bound_id=None, bound_form=None) -> HttpResponse:
    page = page_of(request, selectors.pending_layouts(), PAGE_SIZE)
    found = previews(page.object_list)
    rows = [
        {
            "layout": layout,
            "preview": found[layout.pk],
            "own": layout.requested_by_id == request.user.pk,
            "form": bound_form if layout.pk == bound_id else NoteForm(prefix=f"l{layout.pk}"),
        }
        for layout in page.object_list
    ]
    return render(request, "sharing/review.html", {"rows": rows, "page": page})


@login_required
def layout_review(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    return _render_review(request)


@require_POST
@login_required
def layout_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve or reject (the button pressed) with the form's note."""
    _require_admin(request)
    layout = get_object_or_404(selectors.layouts_visible_to(request.user), pk=pk)
    form = NoteForm(request.POST, prefix=f"l{pk}")
    approve = request.POST.get("decision") == "approve"
    if form.is_valid():
        try:
            if approve:
                services.layout_approve(
                    reviewer=request.user, layout=layout, note=form.cleaned_data["note"]
                )
            else:
                services.layout_reject(
                    reviewer=request.user, layout=layout, note=form.cleaned_data["note"]
                )
        except ValidationError as error:
            add_service_errors(form, error)
        except InvalidTransition as error:
            messages.error(request, str(error))
            return redirect("sharing-review")
        else:
            verb = "Approved" if approve else "Rejected"
            messages.success(request, f"{verb} sharing layout #{layout.pk}.")
            return redirect("sharing-review")
    return _render_review(request, bound_id=pk, bound_form=form)
