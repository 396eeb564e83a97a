"""Changes to sessions: start, stop, resume, and the team's session policy. Views, serializers and
tasks call these.

Each checks first (``PermissionDenied``; ``ValidationError`` naming every bad field;
``InvalidTransition``) and then writes in one transaction, enqueueing the cluster work after
commit (``interactive.tasks``). A GPU session's GPUs count against the team's quota like a
job's (under the team's row lock, in quota mode) or wait in the team's guaranteed queue (Kueue
mode). Stopping keeps the member's home volume; resuming starts the next run, which mounts it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from clusters.vocabulary import GUARANTEED
from interactive import admission, enqueue, events
from interactive.models import ACTIVE_STATES, HomeVolume, InteractiveSession, SessionPolicy
from interactive.permissions import (
    can_resume_session,
    can_set_session_policy,
    can_stop_session,
)
from interactive.specs import SessionRequest
from tenants.audit import audit
from tenants.errors import InvalidTransition
from tenants.models import AuditEvent, Team
from workloads import queueing
from workloads.member_limits import check_member_limit
from workloads.permissions import can_run_workloads
from workloads.quota import check_quota

State = InteractiveSession.State
StopReason = InteractiveSession.StopReason


def _snapshot(session: InteractiveSession) -> dict:
    return {
        "name": session.name,
        "cluster_id": session.cluster_id,
        "image": session.image,
        "gpus": session.gpus,
        "gpu_resource": session.gpu_resource,
        "state": session.state,
        "run": session.run,
    }


def _check_gpu_quota(session_gpus: int, *, team: Team, cluster: Cluster, gpu_resource: str):
    """Under quota only, the session's GPUs must fit what the team's quota leaves (the caller
    holds the team's row lock); in Kueue mode the session waits in the queue instead."""
    if session_gpus and not queueing.queue_for(cluster, GUARANTEED):
        check_quota(
            team=team,
            cluster=cluster,
            gpu_resource=gpu_resource,
            gpus=session_gpus,
            asking="this session asks for",
        )


def session_start(
    *, user: User, team: Team, cluster: Cluster, request: SessionRequest
) -> InteractiveSession:
    """Store a new session (queued) and its owner's home volume (when they have none there yet),
    and create them on the cluster after commit."""
    if not can_run_workloads(user, team):
        raise PermissionDenied(f"Only leads and members of {team.slug} can start sessions there.")
    errors = admission.session_refusals(team=team, cluster=cluster, owner=user, request=request)
    if errors:
        raise ValidationError(errors)
    now = timezone.now()
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=team.pk)
        _check_gpu_quota(
            request.gpus, team=team, cluster=cluster, gpu_resource=request.gpu_resource
        )
        # A session is never left waiting for its owner's own limit: refused on either mode.
        check_member_limit(team=team, cluster=cluster, user=user, gpus=request.gpus)
        # Again under the team's lock: two members' first sessions at once must both fit.
        storage = admission.storage_refusal(team=team, cluster=cluster, owner=user, request=request)
        if storage:
            raise ValidationError(storage)
        home, _ = HomeVolume.objects.get_or_create(
            team=team, cluster=cluster, owner=user, defaults={"size_gib": request.home_gib}
        )
        session = InteractiveSession.objects.create(
            team=team,
            cluster=cluster,
            owner=user,
            state=State.QUEUED,
            message="Waiting for a worker to create it on the cluster.",
            state_changed_at=now,
            queue_name=queueing.queue_for(cluster, GUARANTEED) if request.gpus else "",
            **request.model_fields(),
        )
        audit(
            actor=user,
            action=AuditEvent.Action.SESSION_STARTED,
            target=session,
            team=team,
            before=None,
            after={**_snapshot(session), "home_gib": home.size_gib},
        )
        session_id = session.pk
        transaction.on_commit(lambda: enqueue.enqueue_start(session_id=session_id))
    return session


def session_stop(
    *,
    actor: User | None,
    session: InteractiveSession,
    reason: str = StopReason.OWNER,
    message: str = "",
) -> InteractiveSession:
    """Stop the session's run: it shows stopped at once, and its Job is deleted after commit;
    the home volume stays. ``actor`` None is the portal itself (culling, lifetime)."""
    if actor is not None and not can_stop_session(actor, session):
        raise PermissionDenied(
            f"Only the owner of session #{session.pk}, and leads of {session.team.slug}, can "
            "stop it."
        )
    with transaction.atomic():
        locked = InteractiveSession.objects.select_for_update().get(pk=session.pk)
        if locked.state not in ACTIVE_STATES:
            raise InvalidTransition(
                f"Cannot stop session #{locked.pk}: it is already {locked.state}.",
                current_state=locked.state,
            )
        before = _snapshot(locked)
        now = timezone.now()
        if actor is not None and reason == StopReason.OWNER and actor.pk != locked.owner_id:
            reason = StopReason.ADMIN
        locked.state = State.STOPPED
        locked.stop_reason = reason
        locked.reason = ""
        locked.message = message or _stopped_message(reason, actor)
        locked.stopped_at = now
        locked.stopped_by = actor
        locked.state_changed_at = now
        locked.server_address = ""
        locked.idle_since = None
        locked.warned_at = None
        locked.save()
        audit(
            actor=actor,
            action=AuditEvent.Action.SESSION_STOPPED,
            target=locked,
            team=locked.team,
            before=before,
            after={**_snapshot(locked), "stop_reason": reason},
        )
        events.session_stopped(locked)
        session_id, run = locked.pk, locked.run
        transaction.on_commit(lambda: enqueue.enqueue_delete(session_id=session_id, run=run))
    return locked


def _stopped_message(reason: str, actor: User | None) -> str:
    who = actor.get_username() if actor is not None else "the portal"
    if reason == StopReason.IDLE:
        return "Stopped as idle by the portal; the home volume is kept. Resume it to go on."
    if reason == StopReason.LIFETIME:
        return "Reached its maximum lifetime; the home volume is kept. Resume it to go on."
    return f"Stopped by {who}; the home volume is kept. Resume it to go on."


def session_resume(*, user: User, session: InteractiveSession) -> InteractiveSession:
    """Start the session's next run (a new Job mounting the same home volume), held to the same
    rules as a new session."""
    if not can_resume_session(user, session):
        raise PermissionDenied(f"Only the owner of session #{session.pk} can resume it.")
    request, _ = SessionRequest.read(
        {
            "name": session.name,
            "image": session.image,
            "gpus": session.gpus,
            "gpu_resource": session.gpu_resource,
            "gpu_model": session.gpu_model,
            "cpu_cores": str(session.cpu_cores),
            "memory_gib": str(session.memory_gib),
            "max_lifetime_hours": max(session.max_lifetime_seconds // 3600, 1),
        }
    )
    errors = admission.session_refusals(
        team=session.team, cluster=session.cluster, owner=user, request=request
    )
    errors.pop("home_gib", None)  # the volume is there already
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=session.team_id)
        locked = InteractiveSession.objects.select_for_update().get(pk=session.pk)
        if locked.state in ACTIVE_STATES:
            raise InvalidTransition(
                f"Cannot resume session #{locked.pk}: it is {locked.state}.",
                current_state=locked.state,
            )
        _check_gpu_quota(
            locked.gpus, team=locked.team, cluster=locked.cluster, gpu_resource=locked.gpu_resource
        )
        before = _snapshot(locked)
        now = timezone.now()
        locked.run += 1
        locked.state = State.QUEUED
        locked.reason = ""
        locked.message = "Waiting for a worker to create it on the cluster."
        locked.state_changed_at = now
        locked.started_at = None
        locked.stopped_at = None
        locked.stop_reason = ""
        locked.stopped_by = None
        locked.node = ""
        locked.server_address = ""
        locked.last_activity_at = None
        locked.idle_since = None
        locked.idle_checked_at = None
        locked.warned_at = None
        locked.queue_name = queueing.queue_for(locked.cluster, GUARANTEED) if locked.gpus else ""
        locked.save()
        audit(
            actor=user,
            action=AuditEvent.Action.SESSION_RESUMED,
            target=locked,
            team=locked.team,
            before=before,
            after=_snapshot(locked),
        )
        session_id = locked.pk
        transaction.on_commit(lambda: enqueue.enqueue_start(session_id=session_id))
    return locked


def session_policy_set(
    *, actor: User, team: Team, max_lifetime_hours: int, idle_minutes: int, warn_minutes: int
) -> SessionPolicy:
    """Set the team's session policy (its leads and portal admins), audited. A lifetime beyond
    ``SESSIONS_MAX_LIFETIME_HOURS``, the portal's limit, is refused."""
    if not can_set_session_policy(actor, team):
        raise PermissionDenied(f"Only leads of {team.slug} can set its session policy.")
    if max_lifetime_hours > settings.SESSIONS_MAX_LIFETIME_HOURS:
        raise ValidationError(
            {
                "max_lifetime_hours": f"At most {settings.SESSIONS_MAX_LIFETIME_HOURS} hours, "
                "the portal's limit (SESSIONS_MAX_LIFETIME_HOURS)."
            }
        )
    if idle_minutes <= warn_minutes:
        raise ValidationError(
            {"warn_minutes": "The warning must come before the stop: give fewer minutes."}
        )
    fields = ("max_lifetime_hours", "idle_minutes", "warn_minutes")
    with transaction.atomic():
        # The team's row lock: two leads saving its first policy at once make one row.
        Team.objects.select_for_update().get(pk=team.pk)
        policy = SessionPolicy.objects.filter(team=team).first() or SessionPolicy(team=team)
        before = None if policy.pk is None else {f: getattr(policy, f) for f in fields}
        policy.max_lifetime_hours = max_lifetime_hours
        policy.idle_minutes = idle_minutes
        policy.warn_minutes = warn_minutes
        policy.updated_by = actor
        policy.full_clean(exclude=["team"])
        policy.save()
        audit(
            actor=actor,
            action=AuditEvent.Action.SESSION_POLICY_SET,
            target=policy,
            team=team,
            before=before,
            after={f: getattr(policy, f) for f in fields},
        )
    return policy
