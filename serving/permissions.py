"""Who may do what with inference services. Seeing one is ``selectors.services_visible_to``:
everyone in the team (viewers too) and portal admins."""

from __future__ import annotations

from django.contrib.auth.models import User

from serving.models import InferenceService
from tenants.models import Team
from tenants.permissions import is_portal_admin
from workloads.permissions import can_run_workloads


def can_deploy(user: User, team: Team) -> bool:
    """Leads and members run services, as they run jobs (their cluster role, ``edit``, allows
    as much); viewers only look."""
    return can_run_workloads(user, team)


def can_change(user: User, service: InferenceService) -> bool:
    """Anyone who may deploy in the team may change its services (new revisions, traffic,
    scale, stop, delete), and portal admins may change any."""
    return is_portal_admin(user) or can_deploy(user, service.team)
