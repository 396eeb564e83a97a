"""Who may see and change a team's webhooks: its leads and portal admins. Members and viewers
do not (a webhook's URL may carry a chat room's token), nor anyone outside the team."""

from django.contrib.auth.models import AnonymousUser, User

from tenants.models import Membership, Team
from tenants.permissions import is_portal_admin, team_role


def can_manage_webhooks(user: User | AnonymousUser, team: Team) -> bool:
    return is_portal_admin(user) or team_role(user, team) == Membership.Role.LEAD
