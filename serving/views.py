"""The service pages: list, deploy form, and a page per service that follows it live (htmx polls
small fragments: its revisions and traffic, events, a replica's log) with per-revision GPU
charts side by side, and the forms of every action.

Thin: ``selectors`` decide which services a user sees (another team's is a 404), ``services``
make every change, ``cluster_reads`` fetch logs and events, ``charts`` the GPU charts.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from serving import charts, cluster_reads, manifests, selectors, services, traffic
from serving.filtersets import InferenceServiceFilter
from serving.forms import DeployForm, RevisionForm, ScaleForm, TrafficForm, add_errors
from serving.models import InferenceService, Revision
from serving.observe import rollout_progress
from serving.permissions import can_change
from serving.specs import RevisionRequest
from tenants.errors import InvalidTransition
from workloads import pages

State = InferenceService.State
Rollout = InferenceService.Rollout


def _visible(request: HttpRequest, pk: int) -> InferenceService:
    """The service, or 404 when the user may not see it (never a 403 that confirms it)."""
    return get_object_or_404(selectors.services_visible_to(request.user), pk=pk)


@login_required
def service_list(request: HttpRequest) -> HttpResponse:
    return pages.list_page(
        request,
        filter_class=InferenceServiceFilter,
        rows=selectors.services_visible_to(request.user).order_by("-created_at", "-id"),
        template="serving/service_list.html",
        items="services",
        can_create="can_deploy",
    )


@login_required
def service_new(request: HttpRequest) -> HttpResponse:
    return pages.create_form_page(
        request,
        form_class=DeployForm,
        url_name="service-new",
        template="serving/service_form.html",
        refusal="Only leads and members of a team can deploy services.",
        create=lambda form: services.service_deploy(
            user=request.user,
            team=form.cleaned_data["team"],
            cluster=form.cleaned_data["cluster"],
            request=form.request,
        ),
        add_errors=add_errors,
        done=lambda service: f"Deployed service {service.name}.",
        detail_url_name="service-detail",
    )


# --- one service -------------------------------------------------------------------------------


def routing_note(service: InferenceService) -> str:
    """What the page says about how traffic is split (no traffic is served on a simulated
    cluster: the objects and their states are what is real there)."""
    if selectors.service_routing(service) == traffic.GATEWAY_API:
        return (
            "Traffic is split by the HTTPRoute's backend weights (the cluster serves the "
            "Gateway API): the shares are exact."
        )
    return (
        "The cluster has no Gateway API, so traffic is approximated by replica counts behind one "
        "Service: each revision's share is its share of the ready replicas."
    )


def _live_context(request: HttpRequest, service: InferenceService) -> dict:
    revisions = selectors.live_revisions(service)
    shares = {
        s.number: s
        for s in traffic.plan(
            revisions,
            routing=selectors.service_routing(service),
            stopped=service.state != State.ACTIVE,
        )
    }
    rows = [(r, shares.get(r.number)) for r in revisions]
    return {
        "service": service,
        "rows": rows,
        "candidate": next((r for r in revisions if r.role == Revision.Role.CANDIDATE), None),
        "progress": rollout_progress(
            rollout=service.rollout, state=service.state, revisions=revisions
        ),
        "routing_note": routing_note(service),
        "gpus_held": 0
        if service.state != State.ACTIVE
        else traffic.gpus_held(revisions, routing=selectors.service_routing(service)),
        "refresh_seconds": settings.SERVING_REFRESH_SECONDS,
        "can_change": service.is_live and can_change(request.user, service),
        "following": service.state != State.DELETED,
    }


def _detail(request: HttpRequest, service: InferenceService, **forms) -> HttpResponse:
    context = _live_context(request, service)
    revisions = [row[0] for row in context["rows"]]
    stable = next((r for r in revisions if r.role == Revision.Role.STABLE), None)
    if context["can_change"] and stable is not None:
        forms.setdefault(
            "revision_form",
            RevisionForm(service=service, base=RevisionRequest.from_model(stable)),
        )
        candidate = context["candidate"]
        forms.setdefault(
            "traffic_form",
            TrafficForm(initial={"weight": candidate.weight if candidate else 0}),
        )
        forms.setdefault(
            "scale_form",
            ScaleForm(initial={"replicas": stable.replicas}, revisions=revisions),
        )
    context.update(forms)
    context["retired"] = [r for r in service.revisions.all() if r.role == Revision.Role.RETIRED]
    context["tail_choices"] = pages.LOG_TAIL_CHOICES
    context["containers"] = cluster_reads.CONTAINERS
    context["object_names"] = {
        "deployments": [manifests.revision_object_name(service.name, r.number) for r in revisions]
    }
    return render(request, "serving/service_detail.html", context)


@login_required
def service_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _detail(request, _visible(request, pk))


@login_required
def service_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The state panel alone (htmx polls it)."""
    service = _visible(request, pk)
    return pages.fragment(request, "serving/_service_live.html", _live_context(request, service))


@login_required
def service_logs(request: HttpRequest, pk: int) -> HttpResponse:
    """A replica's log (the newest, unless ``pod`` names one)."""
    service = _visible(request, pk)
    tail = pages.log_tail_choice(request)
    container = request.GET.get("container", "")
    if container not in cluster_reads.CONTAINERS:
        container = manifests.SERVER_CONTAINER
    context: dict = {"service": service, "tail": tail}
    pod = request.GET.get("pod") or None
    return pages.cluster_read_fragment(
        request,
        "serving/_service_logs.html",
        context,
        pods=lambda: [p["metadata"]["name"] for p in cluster_reads.service_pods(service)],
        result=lambda: cluster_reads.replica_log(
            service, pod=pod if pod in context["pods"] else None, container=container, tail=tail
        ),
    )


@login_required
def service_events(request: HttpRequest, pk: int) -> HttpResponse:
    service = _visible(request, pk)
    return pages.cluster_read_fragment(
        request,
        "serving/_service_events.html",
        {"service": service, "refresh_seconds": settings.SERVING_REFRESH_SECONDS * 3},
        events=lambda: cluster_reads.service_events(service),
    )


@login_required
def service_gpus(request: HttpRequest, pk: int) -> HttpResponse:
    """Per-revision GPU charts, side by side."""
    service = _visible(request, pk)
    columns, unavailable = charts.revision_charts(service, selectors.live_revisions(service))
    return pages.fragment(
        request,
        "serving/_service_gpus.html",
        {"service": service, "columns": columns, "unavailable": unavailable},
    )


# --- actions -----------------------------------------------------------------------------------


def _act(request: HttpRequest, service: InferenceService, do, *, done: str) -> HttpResponse:
    """Run an action; its refusal (state, quota, input) is a message on the page."""
    return pages.act(request, do, done=done, then=reverse("service-detail", args=[service.pk]))


@require_POST
@login_required
def service_revision(request: HttpRequest, pk: int) -> HttpResponse:
    """A new revision: rolled out, a canary, or an A/B test (the form says which)."""
    service = _visible(request, pk)
    stable = next(
        (r for r in selectors.live_revisions(service) if r.role == Revision.Role.STABLE), None
    )
    if stable is None or not can_change(request.user, service):
        raise PermissionDenied("This service takes no new revision.")
    form = RevisionForm(request.POST, service=service, base=RevisionRequest.from_model(stable))
    if form.is_valid():
        how = form.cleaned_data["how"]
        try:
            if how == RevisionForm.How.ROLLOUT:
                services.service_update(actor=request.user, service=service, request=form.revision)
                done = "Rolling out a new revision."
            elif how == RevisionForm.How.CANARY:
                weight = form.cleaned_data["weight"]
                services.service_canary(
                    actor=request.user, service=service, request=form.revision, weight=weight
                )
                done = f"Started a canary at {weight}%."
            else:
                services.service_ab_test(
                    actor=request.user,
                    service=service,
                    request=form.revision,
                    variants=form.variants,
                )
                done = "Started an A/B test."
        except InvalidTransition as error:
            messages.error(request, str(error))
        except ValidationError as error:
            add_errors(form, error)
        else:
            messages.success(request, done)
            return redirect("service-detail", pk=service.pk)
    return _detail(request, service, revision_form=form)


@require_POST
@login_required
def service_traffic(request: HttpRequest, pk: int) -> HttpResponse:
    service = _visible(request, pk)
    form = TrafficForm(request.POST)
    revisions = selectors.live_revisions(service)
    candidate = next((r for r in revisions if r.role == Revision.Role.CANDIDATE), None)
    if not form.is_valid() or candidate is None:
        messages.error(request, "Give the candidate's weight, 0-100%.")
        return redirect("service-detail", pk=service.pk)
    weight = form.cleaned_data["weight"]
    split = {r.number: weight if r.pk == candidate.pk else 100 - weight for r in revisions}
    return _act(
        request,
        service,
        lambda: services.service_set_traffic(actor=request.user, service=service, split=split),
        done=f"r{candidate.number} now takes {weight}%.",
    )


@require_POST
@login_required
def service_promote(request: HttpRequest, pk: int) -> HttpResponse:
    service = _visible(request, pk)
    variant = request.POST.get("variant", "")
    return _act(
        request,
        service,
        lambda: services.service_promote(actor=request.user, service=service, variant=variant),
        done="Promoted: it takes all the traffic.",
    )


@require_POST
@login_required
def service_rollback(request: HttpRequest, pk: int) -> HttpResponse:
    service = _visible(request, pk)
    raw = request.POST.get("revision", "")
    revision = int(raw) if raw.isdigit() else None
    return _act(
        request,
        service,
        lambda: services.service_rollback(actor=request.user, service=service, revision=revision),
        done="Rolled back.",
    )


@require_POST
@login_required
def service_scale(request: HttpRequest, pk: int) -> HttpResponse:
    service = _visible(request, pk)
    form = ScaleForm(request.POST, revisions=selectors.live_revisions(service))
    if not form.is_valid():
        return _detail(request, service, scale_form=form)
    try:
        services.service_scale(actor=request.user, service=service, **form.cleaned_data)
    except InvalidTransition as error:
        messages.error(request, str(error))
    except ValidationError as error:
        add_errors(form, error)
        return _detail(request, service, scale_form=form)
    else:
        messages.success(request, f"Scaled to {form.cleaned_data['replicas']} replicas.")
    return redirect("service-detail", pk=service.pk)


@require_POST
@login_required
def service_stop(request: HttpRequest, pk: int) -> HttpResponse:
    service = _visible(request, pk)
    return _act(
        request,
        service,
        lambda: services.service_stop(actor=request.user, service=service),
        done="Stopped: every revision is scaled to zero.",
    )


@require_POST
@login_required
def service_delete(request: HttpRequest, pk: int) -> HttpResponse:
    service = _visible(request, pk)
    return _act(
        request,
        service,
        lambda: services.service_delete(actor=request.user, service=service),
        done="Deleting: its objects are being removed from the cluster.",
    )
