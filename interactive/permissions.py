"""Who may see, open and stop a session.

A session's notebook server is its owner's alone: it runs their code with their files, so only
the owner opens it, whoever else may see that it exists (the team's leads and members, viewers
included, and portal admins, as for jobs). Leads and portal admins may stop a teammate's session
(it holds the team's GPUs); only its owner resumes it.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User

from interactive.models import InteractiveSession
from tenants.models import Membership
from tenants.permissions import can_view_team, is_portal_admin, team_role


def can_view_session(user: User | AnonymousUser, session: InteractiveSession) -> bool:
    return can_view_team(user, session.team)


def can_open_session(user: User | AnonymousUser, session: InteractiveSession) -> bool:
    """Only the owner, while still a lead or member of the session's team."""
    return (
        user.is_authenticated
        and user.pk == session.owner_id
        and team_role(user, session.team) in (Membership.Role.LEAD, Membership.Role.MEMBER)
    )


def can_stop_session(user: User | AnonymousUser, session: InteractiveSession) -> bool:
    if not user.is_authenticated:
        return False
    if user.pk == session.owner_id or is_portal_admin(user):
        return True
    return team_role(user, session.team) == Membership.Role.LEAD


def can_resume_session(user: User | AnonymousUser, session: InteractiveSession) -> bool:
    return can_open_session(user, session)


def can_set_session_policy(user: User | AnonymousUser, team) -> bool:
    """The team's leads and portal admins."""
    return is_portal_admin(user) or team_role(user, team) == Membership.Role.LEAD
