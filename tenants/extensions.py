"""Extending a grant: the quota request that continues it, as the request form is prefilled
from a link (``?extends=<grant id>``) that the grant-ending reminder sends the team's leads.

The extension asks for the same cluster, GPU kind and model, GPUs, CPU and memory, from the
day after the grant's last day, for as long again as the grant lasted; the lead may change any
of it before sending. It is an ordinary request: an admin reviews it like any other.
"""

from __future__ import annotations

import datetime

from django.urls import reverse

from tenants.models import QuotaGrant

EXTENDS_PARAMETER = "extends"


def extension_url(grant: QuotaGrant) -> str:
    """The request form of the grant's team, prefilled to extend it."""
    form = reverse("quota-request-new", args=[grant.team.slug])
    return f"{form}?{EXTENDS_PARAMETER}={grant.pk}"


def extension_initial(grant: QuotaGrant) -> dict:
    """The request form's initial values for extending ``grant`` (which has an end)."""
    starts_on = grant.ends_on + datetime.timedelta(days=1)
    lasted = grant.ends_on - grant.starts_on
    return {
        "cluster": grant.cluster_id,
        "gpu_resource": grant.gpu_resource,
        "gpu_model": grant.gpu_model,
        "gpus": grant.gpus,
        "cpu_cores": grant.cpu_cores,
        "memory_gib": grant.memory_gib,
        "starts_on": starts_on,
        "ends_on": starts_on + lasted,
        "justification": f"Extension of grant #{grant.pk}, which ends on "
        f"{grant.ends_on.isoformat()}.",
    }
