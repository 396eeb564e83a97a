"""The culling rule as a session's page and the API show it: idle since when, warned when, and
when it will be stopped, from what the last check recorded and the team's policy."""

from __future__ import annotations

import datetime

from django.utils import timezone

from interactive.models import InteractiveSession, SessionPolicy, policy_for


def stop_time(
    since: datetime.datetime, warned_at: datetime.datetime | None, policy: SessionPolicy
) -> datetime.datetime:
    """When a session idle ``since`` is stopped: ``idle_minutes`` later, and never sooner than
    ``warn_minutes`` after its owner was warned."""
    stop_at = since + datetime.timedelta(minutes=policy.idle_minutes)
    if warned_at is not None:
        stop_at = max(stop_at, warned_at + datetime.timedelta(minutes=policy.warn_minutes))
    return stop_at


def clock(moment: datetime.datetime) -> str:
    """A time of day in the portal's time zone, named: ``14:05 UTC``."""
    local = timezone.localtime(moment)
    return f"{local:%H:%M} {local.tzname()}"


def idle_summary(session: InteractiveSession) -> dict | None:
    """None unless the session runs; else whether it is idle and, if so, when it is stopped."""
    if session.state != InteractiveSession.State.RUNNING:
        return None
    policy = policy_for(session.team)
    summary = {
        "idle": session.idle_since is not None,
        "since": session.idle_since,
        "warned_at": session.warned_at,
        "stop_at": None,
        "checked_at": session.idle_checked_at,
        "policy": {"idle_minutes": policy.idle_minutes, "warn_minutes": policy.warn_minutes},
        "why": "In use."
        if session.idle_since is None
        else f"No activity in its server, and its GPUs idle, since "
        f"{clock(session.idle_since)}; the team stops sessions idle {policy.idle_minutes} "
        "minutes.",
    }
    if session.idle_since is not None:
        summary["stop_at"] = stop_time(session.idle_since, session.warned_at, policy)
    return summary
