"""What the pages of every workload app share (the jobs' here, the services' in ``serving``):
the teams a user may create workloads in, the create-form page, and the fragments htmx polls
(those that read the cluster among them).
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.core.exceptions import BadRequest, PermissionDenied, ValidationError
from django.db.models import Model, QuerySet
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from clusters.kube import KubeError
from core.params import page_of
from tenants.errors import InvalidTransition
from tenants.models import Membership, Team
from tenants.selectors import teams_visible_to
from workloads.forms import cluster_by_id

# The log tails a workload's page offers.
LOG_TAIL_CHOICES = (100, 500, 2000)


def log_tail_choice(request: HttpRequest) -> int:
    """``?tail=``: one of the log panel's choices (the first when not given), else a 400."""
    raw = request.GET.get("tail", "")
    if not raw:
        return LOG_TAIL_CHOICES[0]
    if raw not in {str(choice) for choice in LOG_TAIL_CHOICES}:
        raise BadRequest(f"tail: Must be one of {', '.join(map(str, LOG_TAIL_CHOICES))}.")
    return int(raw)


def creator_teams(request: HttpRequest) -> QuerySet[Team]:
    """Teams the user may create workloads in: where they are a lead or a member."""
    return teams_visible_to(request.user).filter(
        memberships__user=request.user,
        memberships__role__in=[Membership.Role.LEAD, Membership.Role.MEMBER],
    )


def fragment(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    """A piece of a page that htmx polls: never cached, so every poll sees the news."""
    response = render(request, template, context)
    add_never_cache_headers(response)
    return response


def cluster_read_fragment(
    request: HttpRequest, template: str, context: dict, **reads: Callable[[], object]
) -> HttpResponse:
    """A fragment that shows what the cluster answers: each of ``reads`` (a context key -> a
    read of the cluster, made in order, so a later one may use what an earlier one put in
    ``context``) fills the context, and a cluster that does not answer puts its ``error``
    there instead."""
    try:
        for key, read in reads.items():
            context[key] = read()
    except KubeError as error:
        context["error"] = str(error)
    return fragment(request, template, context)


def create_form_page(
    request: HttpRequest,
    *,
    form_class: type[Form],
    url_name: str,
    template: str,
    refusal: str,
    create: Callable[[Form], Model],
    add_errors: Callable[[Form, ValidationError], None],
    done: Callable[[Model], str],
    detail_url_name: str,
) -> HttpResponse:
    """The page that creates a workload: its form (``form_class``, taking ``teams`` and
    ``cluster``), a 403 (``refusal``) for a user in no team that may create one, and, for htmx,
    the GPU kind and model selects of the cluster the form's cluster select chose. A valid form
    is given to ``create``, whose ``ValidationError`` comes back on the form (``add_errors``);
    what it created is shown at ``detail_url_name`` with the message ``done`` says."""
    teams = creator_teams(request).order_by("name", "slug")
    if request.method == "GET" and request.htmx and "cluster" in request.GET:
        # The cluster select changed: send back the GPU kind and model selects for that cluster.
        form = form_class(teams=teams, cluster=cluster_by_id(request.GET["cluster"]))
        return render(request, "gpujobs/_gpu_model_field.html", {"form": form, "kind_oob": True})
    if not teams.exists():
        raise PermissionDenied(refusal)
    if request.method == "POST":
        form = form_class(request.POST, teams=teams)
        if form.is_valid():
            try:
                created = create(form)
            except ValidationError as error:
                add_errors(form, error)
            else:
                messages.success(request, done(created))
                return redirect(detail_url_name, pk=created.pk)
    else:
        team = teams.filter(slug=request.GET.get("team", "")).first()
        form = form_class(initial={"team": team} if team else {}, teams=teams)
    form.fields["cluster"].widget.attrs.update(
        {"hx-get": reverse(url_name), "hx-target": "#field-gpu_model", "hx-swap": "outerHTML"}
    )
    return render(request, template, {"form": form})


# Workloads per page of a list.
LIST_PAGE_SIZE = 25


def list_page(
    request: HttpRequest,
    *,
    filter_class,
    rows: QuerySet,
    template: str,
    items: str,
    can_create: str,
) -> HttpResponse:
    """A workload list page: the rows the user may see through the app's FilterSet (its form
    offers the user's teams), one page of them (a 400 for a page number out of range, a 404
    past the end), under ``items`` in the context, and under ``can_create`` whether the user
    may create one in some team."""
    filterset = filter_class(
        request.GET,
        queryset=rows,
        request=request,
        teams=teams_visible_to(request.user).order_by("name", "slug"),
    )
    page = page_of(request, filterset.page_rows(), LIST_PAGE_SIZE)
    return render(
        request,
        template,
        {
            "filter_form": filterset.form,
            "page": page,
            items: list(page.object_list),
            can_create: creator_teams(request).exists(),
        },
    )


def act(request: HttpRequest, do: Callable[[], object], *, done: str, then: str) -> HttpResponse:
    """Run a workload's action from its page and go back to ``then`` (a URL): a refusal by
    state or by the rules is a message on the page (one by permission is the service's
    ``PermissionDenied``: a 403)."""
    try:
        do()
    except InvalidTransition as error:
        messages.error(request, str(error))
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, done)
    return redirect(then)
