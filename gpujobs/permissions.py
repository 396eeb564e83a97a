"""Who may do what with GPU jobs. Running them is ``workloads.permissions``'; seeing a job is
``selectors.jobs_visible_to``."""

from __future__ import annotations

from django.contrib.auth.models import User

from gpujobs.models import GpuJob
from tenants.permissions import is_portal_admin
from workloads.permissions import can_run_workloads


def can_stop_job(user: User, job: GpuJob) -> bool:
    """Anyone who may run jobs in the team may stop its jobs (their cluster role, ``edit``,
    allows as much), and portal admins may stop any."""
    return is_portal_admin(user) or can_run_workloads(user, job.team)
