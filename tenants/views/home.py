"""The home page: the teams a user can see, with their active grants and pending requests, a
page of them at a time (an admin sees every team), and for a department admin their departments
and review queue."""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.params import page_of
from tenants import selectors
from tenants.models import Membership, QuotaGrant, QuotaRequest
from tenants.permissions import is_portal_admin

HOME_PAGE_SIZE = 50


@login_required
def home(request: HttpRequest) -> HttpResponse:
    page = page_of(
        request, selectors.teams_visible_to(request.user).order_by("name", "slug"), HOME_PAGE_SIZE
    )
    teams = list(page.object_list)
    roles = dict(Membership.objects.filter(user=request.user).values_list("team_id", "role"))
    grants_by_team: dict[int, list[dict]] = {}
    for row in (
        QuotaGrant.objects.filter(team__in=[t.pk for t in teams], state=QuotaGrant.State.ACTIVE)
        .values("team_id", "cluster__name", "gpu_resource")
        .annotate(gpus=Sum("gpus"), grants=Count("id"))
        .order_by("cluster__name", "gpu_resource")
    ):
        grants_by_team.setdefault(row["team_id"], []).append(row)
    pending_by_team = dict(
        QuotaRequest.objects.filter(
            team__in=[t.pk for t in teams], state=QuotaRequest.State.PENDING
        )
        .values("team_id")
        .annotate(n=Count("id"))
        .values_list("team_id", "n")
    )
    rows = [
        {
            "team": team,
            "role": Membership.Role(roles[team.pk]).label if team.pk in roles else None,
            "grants": grants_by_team.get(team.pk, []),
            "pending": pending_by_team.get(team.pk, 0),
        }
        for team in teams
    ]
    context: dict[str, Any] = {"rows": rows, "page": page}
    if is_portal_admin(request.user):
        context["review_count"] = selectors.review_queue().count()
    else:
        # A department admin finds their departments and review queue here.
        context["departments"] = list(request.user.administered_departments.order_by("slug"))
    return render(request, "tenants/home.html", context)
