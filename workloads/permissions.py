"""Who may run workloads in a team: the same people for every kind (their cluster role,
``edit``, allows as much)."""

from __future__ import annotations

from django.contrib.auth.models import User

from tenants.models import Membership, Team
from tenants.permissions import can_request_quota, team_role


def can_run_workloads(user: User, team: Team) -> bool:
    """Leads and members run jobs and services; viewers only look."""
    return team_role(user, team) in (Membership.Role.LEAD, Membership.Role.MEMBER)


def can_set_member_limits(user: User, team: Team) -> bool:
    """The team's leads (and portal admins) set what each member may hold at once."""
    return can_request_quota(user, team)
