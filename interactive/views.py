"""The session pages: list, start form, a page per session that follows it live (htmx polls its
state panel: state, idleness, the culling warning) with its Open, Stop and Resume buttons, and
a team's session policy for its leads.

Thin: ``selectors`` decide which sessions a user sees (another team's is a 404), ``services``
make every change, ``culling_view`` explains the culling. The notebook itself is served by the
portal's proxy at ``session.path``; these pages only link to it.
"""

from __future__ import annotations

import functools

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.params import page_of
from interactive import admission, culling_view, selectors, services
from interactive.forms import SessionFilter, SessionForm, SessionPolicyForm, add_session_errors
from interactive.models import InteractiveSession, SessionPolicy, policy_for
from interactive.permissions import (
    can_open_session,
    can_resume_session,
    can_set_session_policy,
    can_stop_session,
)
from tenants.models import Membership
from tenants.permissions import is_portal_admin
from tenants.selectors import teams_visible_to
from workloads import pages
from workloads.forms import add_request_errors

State = InteractiveSession.State

# How often a session's page asks for its state while it is active (the culling check writes
# idleness every SESSIONS_CULL_CHECK_SECONDS; starting takes seconds).
REFRESH_SECONDS = 3


def _visible_session(request: HttpRequest, pk: int) -> InteractiveSession:
    """The session, or 404 when the user may not see it (never a 403 that confirms it)."""
    return get_object_or_404(selectors.sessions_visible_to(request.user), pk=pk)


# --- list --------------------------------------------------------------------------------------


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    """The sessions of the user's teams, newest first, with an Open link on the user's own
    running ones (``pages.list_page``'s steps, with what only this list shows)."""
    user = request.user
    visible_teams = teams_visible_to(user).order_by("name", "slug")
    filterset = SessionFilter(
        request.GET,
        queryset=selectors.sessions_visible_to(user).order_by("-created_at", "-id"),
        request=request,
        teams=visible_teams,
    )
    page = page_of(request, filterset.page_rows(), pages.LIST_PAGE_SIZE)
    creator_teams = pages.creator_teams(request)
    # ``can_open_session`` for every row at once: the owner, while a lead or member there.
    opener_team_ids = set(creator_teams.values_list("pk", flat=True))
    rows = [
        {
            "session": session,
            "can_open": session.state == State.RUNNING
            and session.owner_id == user.pk
            and session.team_id in opener_team_ids,
        }
        for session in page.object_list
    ]
    # Leads set their teams' policies; an admin, the policy of the team the list shows.
    policy_teams = list(
        visible_teams.filter(memberships__user=user, memberships__role=Membership.Role.LEAD)
    )
    shown = visible_teams.filter(slug=request.GET.get("team", "")).first()
    if shown is not None and shown not in policy_teams and is_portal_admin(user):
        policy_teams.append(shown)
    return render(
        request,
        "interactive/session_list.html",
        {
            "filter_form": filterset.form,
            "page": page,
            "rows": rows,
            "can_start": creator_teams.exists(),
            "policy_teams": policy_teams,
        },
    )


# --- start -------------------------------------------------------------------------------------


@login_required
def session_new(request: HttpRequest) -> HttpResponse:
    return pages.create_form_page(
        request,
        form_class=functools.partial(SessionForm, user=request.user),
        url_name="session-new",
        template="interactive/session_form.html",
        refusal="Only leads and members of a team can start sessions.",
        create=lambda form: services.session_start(
            user=request.user,
            team=form.cleaned_data["team"],
            cluster=form.cleaned_data["cluster"],
            request=form.session_request,
        ),
        add_errors=add_session_errors,
        done=lambda session: (
            f"Starting session #{session.pk} {session.name}: open it once it runs."
        ),
        detail_url_name="session-detail",
    )


# --- one session -------------------------------------------------------------------------------


def _live_context(request: HttpRequest, session: InteractiveSession) -> dict:
    user = request.user
    return {
        "session": session,
        "idle": culling_view.idle_summary(session),
        "ends_at": session.ends_at,
        "refresh_seconds": REFRESH_SECONDS,
        "following": session.is_active,
        "can_open": session.state == State.RUNNING and can_open_session(user, session),
        "can_stop": session.is_active and can_stop_session(user, session),
        "can_resume": not session.is_active and can_resume_session(user, session),
    }


@login_required
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = _visible_session(request, pk)
    context = _live_context(request, session)
    context["lifetime_hours"] = session.max_lifetime_seconds // 3600
    context["home"] = admission.home_volume_of(
        team=session.team, cluster=session.cluster, owner=session.owner
    )
    return render(request, "interactive/session_detail.html", context)


@login_required
def session_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The state panel alone (htmx polls it while the session is active)."""
    session = _visible_session(request, pk)
    return pages.fragment(
        request, "interactive/_session_live.html", _live_context(request, session)
    )


def _act(request: HttpRequest, session: InteractiveSession, do, *, done: str) -> HttpResponse:
    return pages.act(request, do, done=done, then=reverse("session-detail", args=[session.pk]))


@require_POST
@login_required
def session_stop(request: HttpRequest, pk: int) -> HttpResponse:
    session = _visible_session(request, pk)
    return _act(
        request,
        session,
        lambda: services.session_stop(actor=request.user, session=session),
        done=f"Stopping session #{session.pk}: its server ends; the home volume is kept.",
    )


@require_POST
@login_required
def session_resume(request: HttpRequest, pk: int) -> HttpResponse:
    session = _visible_session(request, pk)
    return _act(
        request,
        session,
        lambda: services.session_resume(user=request.user, session=session),
        done=f"Resuming session #{session.pk}: a new run with the same home volume.",
    )


# --- a team's policy ---------------------------------------------------------------------------


def _policy_initial(policy: SessionPolicy) -> dict:
    return {
        "max_lifetime_hours": policy.max_lifetime_hours,
        "idle_minutes": policy.idle_minutes,
        "warn_minutes": policy.warn_minutes,
    }


@login_required
def session_policy(request: HttpRequest, slug: str) -> HttpResponse:
    """The team's session policy, for its leads and portal admins (another team's: 404)."""
    team = get_object_or_404(teams_visible_to(request.user), slug=slug)
    if not can_set_session_policy(request.user, team):
        raise PermissionDenied(f"Only leads of {team.slug} can set its session policy.")
    policy = policy_for(team)
    if request.method == "POST":
        form = SessionPolicyForm(request.POST)
        if form.is_valid():
            try:
                services.session_policy_set(actor=request.user, team=team, **form.cleaned_data)
            except ValidationError as error:
                add_request_errors(form, error)
            else:
                messages.success(request, f"Saved {team.name}'s session policy.")
                return redirect("session-policy", slug=team.slug)
    else:
        form = SessionPolicyForm(initial=_policy_initial(policy))
    return render(
        request,
        "interactive/session_policy.html",
        {"team": team, "form": form, "policy": policy, "is_default": policy.pk is None},
    )
