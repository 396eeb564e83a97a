"""Who may do what. Every view, serializer and service asks these, so the rules live here once."""

from django.contrib.auth.models import AnonymousUser, User

from tenants.models import Membership, Team

Role = Membership.Role


def is_portal_admin(user: User | AnonymousUser) -> bool:
    """Admins are a portal-wide role (Django staff), separate from any team role."""
    return bool(user.is_authenticated and user.is_active and (user.is_staff or user.is_superuser))


def team_role(user: User | AnonymousUser, team: Team) -> str | None:
    """The user's role in the team, or None when they are not a member."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(team=team, user=user).values_list("role", flat=True).first()


def can_view_team(user: User | AnonymousUser, team: Team) -> bool:
    return is_portal_admin(user) or team_role(user, team) is not None


def can_request_quota(user: User | AnonymousUser, team: Team) -> bool:
    """Team leads ask for quota (admins may file on a team's behalf)."""
    return is_portal_admin(user) or team_role(user, team) == Role.LEAD


def administers_a_department(user: User | AnonymousUser) -> bool:
    """Department admins decide their departments' teams' requests within the ceilings
    (``tenants.ceilings``)."""
    return bool(user.is_authenticated and user.is_active and user.administered_departments.exists())


def can_review_quota(user: User | AnonymousUser) -> bool:
    """Who has a review queue: portal admins, and department admins for their teams."""
    return is_portal_admin(user) or administers_a_department(user)
