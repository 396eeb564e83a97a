"""Reads of sessions: what a user may list, and where the proxy sends a user's requests."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, OuterRef, QuerySet, Subquery, Sum

from interactive.models import ACTIVE_STATES, HomeVolume, InteractiveSession
from interactive.permissions import can_open_session, can_view_session
from tenants.permissions import is_portal_admin

State = InteractiveSession.State


def sessions_visible_to(user: User | AnonymousUser) -> QuerySet[InteractiveSession]:
    """The sessions of every team the user belongs to (all of them for a portal admin)."""
    home = HomeVolume.objects.filter(
        team=OuterRef("team"), cluster=OuterRef("cluster"), owner=OuterRef("owner")
    ).values("size_gib")[:1]
    sessions = InteractiveSession.objects.select_related(
        "team", "team__session_policy", "cluster", "owner"
    ).annotate(home_size_gib=Subquery(home))
    if is_portal_admin(user):
        return sessions
    if not user.is_authenticated:
        return sessions.none()
    return sessions.filter(team__memberships__user=user).distinct()


@dataclass(frozen=True)
class ProxyTarget:
    """Where the proxy sends the owner's requests: the server's ``http://host:port`` and the
    token it asks for (sent as ``Authorization: token ...``, never in a URL)."""

    base_url: str
    token: str


class ProxyRefusal(Exception):
    """Why the proxy does not forward: an HTTP status and a sentence for the user."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def proxy_target(*, session_id: int, user: User | AnonymousUser) -> ProxyTarget:
    """The running server of ``session_id`` for its owner, or a ``ProxyRefusal``: 401 for a
    visitor who has not signed in, 404 for a session the user may not know of (another team's,
    or none), 403 for a teammate's, 409 for one that is not running (yet)."""
    if not user.is_authenticated:
        raise ProxyRefusal(401, "Sign in to the portal to open this session.")
    session = InteractiveSession.objects.select_related("team").filter(pk=session_id).first()
    if session is None or not can_view_session(user, session):
        raise ProxyRefusal(404, f"No session #{session_id}.")
    if not can_open_session(user, session):
        raise ProxyRefusal(
            403, f"Session #{session_id} is {session.owner.get_username()}'s: only they open it."
        )
    if session.state != State.RUNNING or not session.server_address:
        raise ProxyRefusal(
            409,
            f"Session #{session_id} is {session.get_state_display().lower()}, not running: "
            "open its page in the portal to start or resume it.",
        )
    return ProxyTarget(base_url=f"http://{session.server_address}", token=session.token)


def gpus_held_by_sessions(*, team, cluster, gpu_resource: str) -> int:
    """The GPUs of a kind the team's active sessions hold (or are about to) on the cluster."""
    held = InteractiveSession.objects.filter(
        team=team, cluster=cluster, gpu_resource=gpu_resource, state__in=ACTIVE_STATES
    ).aggregate(total=Sum("gpus"))["total"]
    return held or 0


def member_sessions_use(*, team, cluster, user) -> tuple[int, int]:
    """The GPUs and the number of a member's active sessions on the cluster
    (``workloads.member_limits``)."""
    use = InteractiveSession.objects.filter(
        team=team, cluster=cluster, owner=user, state__in=ACTIVE_STATES
    ).aggregate(gpus=Sum("gpus"), sessions=Count("pk"))
    return use["gpus"] or 0, use["sessions"]
