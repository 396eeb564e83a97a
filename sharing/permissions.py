"""Who may do what with sharing layouts: a team's leads ask (and withdraw), portal admins
decide. Department admins see their teams' layouts but do not decide them: a layout changes
nodes every team shares."""

from django.contrib.auth.models import AnonymousUser, User

from tenants.models import Membership, Team
from tenants.permissions import is_portal_admin, team_role


def can_request_layout(user: User | AnonymousUser, team: Team) -> bool:
    return is_portal_admin(user) or team_role(user, team) == Membership.Role.LEAD


def can_decide_layouts(user: User | AnonymousUser) -> bool:
    return is_portal_admin(user)
