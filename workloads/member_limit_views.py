"""A lead setting and lifting the team's member limits from the team page
(``workloads.member_limits``); the page shows them with ``{% team_member_limits %}``."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from tenants.forms import add_service_errors
from tenants.selectors import teams_visible_to
from workloads import member_limits
from workloads.forms import MemberLimitForm
from workloads.models import MemberLimit
from workloads.permissions import can_set_member_limits


def _team(request: HttpRequest, slug: str):
    return get_object_or_404(teams_visible_to(request.user), slug=slug)


@require_http_methods(["GET", "POST"])
@login_required
def member_limit_set(request: HttpRequest, slug: str) -> HttpResponse:
    """The form (a lead's), and saving it: back to the team page, or the form again with its
    errors."""
    team = _team(request, slug)
    if not can_set_member_limits(request.user, team):
        raise PermissionDenied(f"Only leads of {team.slug} can set its members' limits.")
    if request.method == "GET":
        form = MemberLimitForm(team=team, initial=request.GET.dict())
        return render(request, "workloads/member_limit_form.html", {"team": team, "form": form})
    form = MemberLimitForm(request.POST, team=team)
    if form.is_valid():
        data = form.cleaned_data
        try:
            limit = member_limits.member_limit_set(
                actor=request.user,
                team=team,
                user=data["user"],
                cluster=data["cluster"],
                max_gpus=data["max_gpus"],
                max_running=data["max_running"],
            )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(
                request,
                f"Limit of {limit.user.get_username()} on {limit.cluster.name} saved.",
            )
            return redirect("team-detail", slug=team.slug)
    return render(
        request, "workloads/member_limit_form.html", {"team": team, "form": form}, status=400
    )


@require_POST
@login_required
def member_limit_remove(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    team = _team(request, slug)
    limit = get_object_or_404(
        MemberLimit.objects.select_related("user", "cluster"), pk=pk, team=team
    )
    member_limits.member_limit_remove(actor=request.user, limit=limit)
    messages.success(
        request, f"Limit of {limit.user.get_username()} on {limit.cluster.name} lifted."
    )
    return redirect("team-detail", slug=team.slug)
