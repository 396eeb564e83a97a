"""Jobs that wait in the portal for their member's own limit (``workloads.member_limits``), on
a cluster whose quota Kueue enforces: stored queued with reason ``MemberLimit`` and not sent to
the cluster, then released, oldest first, once the member is under the limit again.

A release runs when one of the member's jobs ends or is stopped, one of their sessions ends, or
their limit changes (``release_after_commit``, registered in ``workloads.member_limits`` for
the others), and for every member with waiting jobs on each periodic resync (a lost message).
It holds the team's row lock, as a submission does, so a release and a submission never both
fit in the same room.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from gpujobs.enqueue import enqueue_release, enqueue_submits
from gpujobs.models import GpuJob
from gpujobs.observe import Reason
from tenants.models import Team
from workloads import member_limits
from workloads.member_limits import MemberUse

State = GpuJob.State
SENT_MESSAGE = "Waiting for a worker to create it on the cluster."


def held_message(reason: str) -> str:
    return (
        f"Waiting in the portal, not yet sent to the cluster. {reason} It goes once one of "
        "your jobs or sessions there ends."
    )


def held_jobs():
    return GpuJob.objects.filter(state=State.QUEUED, reason=Reason.MEMBER_LIMIT)


def release_after_commit(*, team_id: int, cluster_id: int, user_id: int) -> None:
    """The member may have room again (one of their jobs or sessions ended, their limit
    changed): their jobs waiting for it may go (a task, once the transaction commits; nothing
    when none waits)."""
    if held_jobs().filter(team_id=team_id, cluster_id=cluster_id, submitted_by_id=user_id).exists():
        transaction.on_commit(
            lambda: enqueue_release(team_id=team_id, cluster_id=cluster_id, user_id=user_id)
        )


def release_after_commit_of(job: GpuJob) -> None:
    """``release_after_commit`` for the member of ``job``, which just ended or was stopped."""
    release_after_commit(
        team_id=job.team_id, cluster_id=job.cluster_id, user_id=job.submitted_by_id
    )


def release_held_jobs(*, team_id: int, cluster_id: int, user_id: int) -> list[int]:
    """Send the member's waiting jobs to the cluster, oldest first, while they fit the limit
    (a younger, smaller job never overtakes an older one); the first that does not fit, and
    those after it, wait on with the reason brought up to date. Returns the ids sent."""
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=team_id)
        waiting = list(
            held_jobs()
            .filter(team_id=team_id, cluster_id=cluster_id, submitted_by_id=user_id)
            .select_for_update()
            .order_by("created_at", "pk")
        )
        if not waiting:
            return []
        cluster = Cluster.objects.get(pk=cluster_id)
        user = User.objects.get(pk=user_id)
        limit = member_limits.limit_of(team=team, cluster=cluster, user=user)
        use = member_limits.member_use(team=team, cluster=cluster, user=user)
        released: list[int] = []
        before = MemberUse()
        for job in waiting:
            reason = member_limits.over_limit(
                team=team,
                cluster=cluster,
                user=user,
                gpus=job.gpus,
                use=use,
                before=before,
                limit=limit,
            )
            if reason is not None:
                GpuJob.objects.filter(pk=job.pk).update(message=held_message(reason))
                break
            released.append(job.pk)
            before = MemberUse(before.gpus + job.gpus, before.running + 1)
        if released:
            GpuJob.objects.filter(pk__in=released).update(
                reason="", message=SENT_MESSAGE, state_changed_at=timezone.now()
            )
            transaction.on_commit(lambda: enqueue_submits(job_ids=released))
    return released


def release_every_held_job() -> dict[str, list[int]]:
    """``release_held_jobs`` for every member with waiting jobs (the periodic pass)."""
    members = held_jobs().values_list("team_id", "cluster_id", "submitted_by_id").distinct()
    released = {}
    for team_id, cluster_id, user_id in members.order_by():
        sent = release_held_jobs(team_id=team_id, cluster_id=cluster_id, user_id=user_id)
        if sent:
            released[f"{team_id}/{cluster_id}/{user_id}"] = sent
    return released
