"""Who may do what in monitoring. Pages, the API and services ask these, so the rules live here
once. Which teams a user sees at all (and so whose dashboards, pods and usage) is
``tenants.selectors.teams_visible_to``; these are the rules on top of it."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied

from tenants.models import Membership, Team
from tenants.permissions import is_portal_admin, team_role


def can_set_idle_policy(user: User | AnonymousUser, team: Team) -> bool:
    """A team's idle policy (who is told, when idle pods are stopped) is its leads' to set, and
    portal admins'."""
    return is_portal_admin(user) or team_role(user, team) == Membership.Role.LEAD


def check_can_set_idle_policy(user: User | AnonymousUser, team: Team) -> None:
    if not can_set_idle_policy(user, team):
        raise PermissionDenied(f"Only leads of {team.slug} can change its idle policy.")


def can_see_clusters(user: User | AnonymousUser) -> bool:
    """Whole clusters (every node, every team's pods, cluster-wide alert rules) are for portal
    admins."""
    return is_portal_admin(user)


def check_can_see_clusters(user: User | AnonymousUser) -> None:
    if not can_see_clusters(user):
        raise PermissionDenied("Only portal admins can see whole clusters.")
