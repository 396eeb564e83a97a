"""Whether a grant counts on a day. Pure: the quota the cluster is given (``reconcile``), the
impact preview and the queues all ask it the same way."""

from __future__ import annotations

import datetime


def in_effect(grant, today: datetime.date) -> bool:
    """Active and within its period today. An active grant whose last day has passed no longer
    counts, even before the expiry task marks it expired."""
    return (
        grant.state == "active"
        and grant.starts_on <= today
        and (grant.ends_on is None or grant.ends_on >= today)
    )
