"""What a session's team hears when one of its sessions stops, however it stopped (its owner, a
lead, the idle check, its lifetime, a crash): a ``session.stopped`` event for the team's
webhooks, and for a session stopped as idle a notification to its owner."""

from __future__ import annotations

from interactive.models import InteractiveSession
from monitoring.models import Notification
from tenants.events import EventKind, emit
from workloads import member_limits


def session_stopped(session: InteractiveSession) -> None:
    """Call inside the transaction that recorded the stop. The owner's jobs waiting for their
    own limit in the team may go now (``workloads.member_limits``)."""
    member_limits.room_made(
        team_id=session.team_id, cluster_id=session.cluster_id, user_id=session.owner_id
    )
    link = f"/interactive/{session.pk}/"
    ended = "failed" if session.state == InteractiveSession.State.FAILED else "stopped"
    title = f"Session #{session.pk} {session.name} of {session.owner.get_username()} {ended}"
    if session.stop_reason:
        title += f" ({session.get_stop_reason_display().lower()})"
    emit(
        team_id=session.team_id,
        kind=EventKind.SESSION_STOPPED,
        title=title,
        data={
            "session_id": session.pk,
            "state": session.state,
            "stop_reason": session.stop_reason,
            "reason": session.reason,
        },
        link=link,
    )
    if session.stop_reason == InteractiveSession.StopReason.IDLE:
        Notification.objects.create(
            user=session.owner,
            team=session.team,
            kind=Notification.Kind.IDLE_STOPPED,
            subject=f"Session {session.name} was stopped as idle",
            body=session.message,
            link=link,
        )
