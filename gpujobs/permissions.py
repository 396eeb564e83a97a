"""Who may do what with GPU jobs. Seeing a job is ``selectors.jobs_visible_to``."""

from __future__ import annotations

from django.contrib.auth.models import User

from gpujobs.models import GpuJob
from tenants.models import Membership, Team
from tenants.permissions import is_portal_admin, team_role


def can_submit_jobs(user: User, team: Team) -> bool:
    """Leads and members run jobs; viewers only look."""
    return team_role(user, team) in (Membership.Role.LEAD, Membership.Role.MEMBER)


def can_stop_job(user: User, job: GpuJob) -> bool:
    """Anyone who may run jobs in the team may stop its jobs (their cluster role, ``edit``,
    allows as much), and portal admins may stop any."""
    return is_portal_admin(user) or can_submit_jobs(user, job.team)
