"""Monitoring pages. Thin: ``tenants.selectors`` decides which teams a user sees, the team's
slug is the only namespace any query filters on, ``dashboards`` builds every chart, and
``permissions`` says who may set a policy or see whole clusters.

A page asked by htmx (auto refresh) gets only its live region back. Pages with charts go out
compressed (their figures' numbers shrink to about a third); Django's GZip adds random padding
against BREACH, and the CSRF token in them is masked afresh for every response."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.gzip import gzip_page
from django.views.decorators.http import require_POST

from clusters.models import Cluster
from core.params import page_of
from monitoring import dashboards, idle, permissions, rules, selectors, usage
from monitoring.forms import IdlePolicyForm, IdleServicesPolicyForm, UsageReportForm, WindowForm
from monitoring.models import IdlePolicy
from monitoring.notifications import notifications_mark_read
from tenants.forms import add_service_errors
from tenants.models import Team
from tenants.selectors import teams_visible_to

POD_NAME_MAX_LENGTH = 253
USAGE_PAGE_SIZE = 50


def _visible_team(request: HttpRequest, slug: str) -> Team:
    """The team, or 404 when the user may not see it (never a 403 that confirms it exists)."""
    return get_object_or_404(teams_visible_to(request.user), slug=slug)


def _chosen(request: HttpRequest, clusters: list[Cluster]) -> Cluster | None:
    """The cluster asked for by name when it is one of ``clusters``, else the first."""
    wanted = request.GET.get("cluster")
    return next((c for c in clusters if c.name == wanted), clusters[0] if clusters else None)


def _window_context(request: HttpRequest) -> dict:
    """The window form (``?window=``, or ``?start=`` and ``?end=``) and the window it gives."""
    window_form = WindowForm(request.GET or None)
    return {"window_form": window_form, "window": window_form.window_value}


def _team_context(request: HttpRequest, team: Team, **context) -> dict:
    """What a team's pages show beside their charts: the team, its clusters with metrics, the
    one chosen and the window."""
    clusters = selectors.team_clusters(team)
    return {
        "team": team,
        **context,
        "clusters": clusters,
        "cluster": _chosen(request, clusters),
        **_window_context(request),
    }


LIVE_PARAMETERS = ("cluster", "window", "start", "end")


def _render_live(request: HttpRequest, page: str, live: str, context: dict) -> HttpResponse:
    """The page, or for htmx (auto refresh) its live region, which asks for itself again with
    the same cluster and window."""
    query = urlencode([(k, request.GET[k]) for k in LIVE_PARAMETERS if request.GET.get(k)])
    context["refresh_seconds"] = settings.MONITORING_REFRESH_SECONDS
    context["refresh_url"] = f"{request.path}?{query}" if query else request.path
    response = render(request, live if request.htmx else page, context)
    patch_vary_headers(response, ("HX-Request",))
    return response


@gzip_page
@login_required
def team_monitoring(request: HttpRequest, slug: str) -> HttpResponse:
    team = _visible_team(request, slug)
    context = _team_context(request, team)
    cluster, window = context["cluster"], context["window"]
    if cluster is not None:
        # First: its queries run while the rest of the page is read and rendered.
        context["dashboard"] = dashboards.team_dashboard(team=team, cluster=cluster, window=window)
        context["open_idle"] = list(selectors.open_idle_pods(team=team, cluster=cluster))
    context["can_set_policy"] = permissions.can_set_idle_policy(request.user, team)
    if context["can_set_policy"] and not request.htmx:
        policy = IdlePolicy.objects.filter(team=team).first() or IdlePolicy(team=team)
        context["policy"] = policy
        context["policy_form"] = IdlePolicyForm(
            initial={
                "notify_leads": policy.notify_leads,
                "stop_after_minutes": policy.stop_after_minutes,
                "warn_minutes_before_stop": policy.warn_minutes_before_stop,
            }
        )
        context["services_policy_form"] = IdleServicesPolicyForm(
            initial={"stop_services": policy.stop_services}
        )
    return _render_live(request, "monitoring/team.html", "monitoring/_team_live.html", context)


@gzip_page
@login_required
def pod_monitoring(request: HttpRequest, slug: str, pod: str) -> HttpResponse:
    team = _visible_team(request, slug)
    if len(pod) > POD_NAME_MAX_LENGTH:
        raise Http404("Not a pod name.")
    context = _team_context(request, team, pod=pod)
    cluster, window = context["cluster"], context["window"]
    if cluster is not None:
        # The namespace is the team's; the pod name only narrows within it.
        context["dashboard"] = dashboards.pod_dashboard(
            cluster=cluster, namespace=team.slug, pod_names=[pod], window=window
        )
    return _render_live(request, "monitoring/pod.html", "monitoring/_pod_live.html", context)


@require_POST
@login_required
def idle_policy_update(request: HttpRequest, slug: str) -> HttpResponse:
    team = _visible_team(request, slug)
    permissions.check_can_set_idle_policy(request.user, team)
    form = IdlePolicyForm(request.POST)
    services_form = IdleServicesPolicyForm(request.POST)
    if form.is_valid() and services_form.is_valid():
        try:
            idle.idle_policy_set(
                actor=request.user, team=team, **form.cleaned_data, **services_form.cleaned_data
            )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Saved {team}'s idle policy.")
            return redirect("monitoring-team", slug=team.slug)
    for error in form.errors.values():
        messages.error(request, " ".join(error))
    return redirect("monitoring-team", slug=team.slug)


def _rules_answer(
    request: HttpRequest, *, cluster: Cluster, team: Team | None, name: str
) -> HttpResponse:
    """The alert rules of the team on the cluster (``team`` None: of the whole cluster) as a
    YAML file ``<name>-<format>.yaml``, in the ``?format=`` asked for; a 400 in words for an
    unknown format."""
    rule_format = request.GET.get("format", "rules")
    try:
        text = rules.alert_rules_yaml(cluster=cluster, team=team, format=rule_format)
    except ValidationError as error:
        return HttpResponse(" ".join(error.messages), status=400, content_type="text/plain")
    response = HttpResponse(text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}-{rule_format}.yaml"'
    return response


@login_required
def team_alert_rules(request: HttpRequest, slug: str) -> HttpResponse:
    team = _visible_team(request, slug)
    cluster = _chosen(request, selectors.team_clusters(team))
    if cluster is None:
        raise Http404("No cluster has metrics.")
    return _rules_answer(request, cluster=cluster, team=team, name=f"{team.slug}-{cluster.name}")


@login_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    permissions.check_can_see_clusters(request.user)
    return render(
        request, "monitoring/cluster_list.html", {"clusters": Cluster.objects.order_by("name")}
    )


@gzip_page
@login_required
def cluster_monitoring(request: HttpRequest, name: str) -> HttpResponse:
    permissions.check_can_see_clusters(request.user)
    cluster = get_object_or_404(Cluster, name=name)
    context = {"cluster": cluster, **_window_context(request)}
    if cluster.prometheus_url:
        context["dashboard"] = dashboards.cluster_dashboard(
            cluster=cluster, window=context["window"]
        )
    return _render_live(
        request, "monitoring/cluster.html", "monitoring/_cluster_live.html", context
    )


@login_required
def cluster_alert_rules(request: HttpRequest, name: str) -> HttpResponse:
    permissions.check_can_see_clusters(request.user)
    cluster = get_object_or_404(Cluster, name=name)
    return _rules_answer(request, cluster=cluster, team=None, name=cluster.name)


@login_required
def usage_report(request: HttpRequest) -> HttpResponse:
    form = UsageReportForm(request.GET or None, user=request.user)
    report = None
    if not form.is_bound:
        form = UsageReportForm({}, user=request.user)
    page = None
    if form.is_valid():
        report = usage.usage_report(user=request.user, **form.cleaned_data)
        # The page shows a page of rows (an admin's report has a row per team); the totals
        # and the CSV cover them all.
        page = page_of(request, report.rows, USAGE_PAGE_SIZE)
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "monitoring/usage.html",
        {"form": form, "report": report, "page": page, "query": query.urlencode()},
    )


@login_required
def usage_report_csv(request: HttpRequest) -> HttpResponse:
    form = UsageReportForm(request.GET, user=request.user)
    if not form.is_valid():
        return HttpResponse(
            " ".join(form.non_field_errors() or [str(form.errors)]),
            status=400,
            content_type="text/plain",
        )
    data = form.cleaned_data
    report = usage.usage_report(user=request.user, **data)
    response = HttpResponse(report.csv(), content_type="text/csv; charset=utf-8")
    name = f"gpu-usage-{data['start']:%Y%m%d}-{data['end']:%Y%m%d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
def notification_list(request: HttpRequest) -> HttpResponse:
    notifications = list(selectors.notifications_for(request.user).order_by("-created_at")[:100])
    return render(request, "monitoring/notifications.html", {"notifications": notifications})


@require_POST
@login_required
def notifications_read(request: HttpRequest) -> HttpResponse:
    given = request.POST.getlist("id")
    # No id: all of them. Ids that are not notification ids name none (never all).
    ids = [int(i) for i in given if i.isascii() and i.isdigit() and len(i) < 19] if given else None
    notifications_mark_read(user=request.user, ids=ids)
    return redirect(reverse("notification-list"))
