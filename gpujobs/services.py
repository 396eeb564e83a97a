"""Changes to GPU jobs: submit, cancel, create on the cluster, delete from it, requeue, and move
a waiting job to its cluster's quota mode. Views, serializers and tasks call these.

``job_submit`` and ``job_cancel`` check first (``PermissionDenied``, ``ValidationError`` naming
every bad field, ``InvalidTransition``) and then write in one transaction, enqueueing the
cluster work after commit. The cluster side (``job_create_on_cluster``,
``job_delete_from_cluster``) is safe to run twice: the Job's name comes from the job's id, a
second create finds the first one, and a worker claims a job with a conditional update before
creating it. What the cluster then shows is recorded by ``recording``.

On a cluster whose quota Kueue enforces (``Cluster.quota_mode``), a job that does not fit the
team's free quota waits in the team's queue instead of being refused; only a job that can never
run is refused (``admission.queue_fit_refusals``). Its Job is created suspended in the team's
LocalQueue for its kind of work, and Kueue admits it. Which mode a Job is made for is the
cluster's mode when the Job is created; a waiting Job made for the other mode is made again
(``job_requeue_for_mode``) when its cluster's mode changes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from gpujobs import admission, member_holds
from gpujobs.enqueue import enqueue_delete, enqueue_submits
from gpujobs.models import GpuJob
from gpujobs.observe import FINAL_STATES
from gpujobs.permissions import can_stop_job
from gpujobs.specs import JobRequest
from tenants.audit import audit, audit_each
from tenants.errors import InvalidTransition
from tenants.models import AuditEvent, Team
from workloads import member_limits, queueing
from workloads.admission import field_errors
from workloads.member_limits import MemberUse
from workloads.permissions import can_run_workloads
from workloads.pod_states import Reason
from workloads.quota import check_quota
from workloads.specs import Errors

logger = logging.getLogger(__name__)

State = GpuJob.State


def _job_snapshot(job: GpuJob) -> dict:
    return {
        "name": job.name,
        "cluster_id": job.cluster_id,
        "image": job.image,
        "gpus": job.gpus,
        "gpu_resource": job.gpu_resource,
        "gpu_model": job.gpu_model,
        "state": job.state,
    }


def job_submit(*, user: User, team: Team, cluster: Cluster, job_request: JobRequest) -> GpuJob:
    """Store a new job (queued) once the team's and the cluster's rules admit it, and create it
    on the cluster after commit. ``job_request`` comes from ``JobRequest.parse``."""
    _check_may_submit(user, team)
    (errors,) = admission.submission_refusals(
        team=team, cluster=cluster, job_requests=[job_request]
    )
    if errors:
        raise ValidationError(errors)
    return _store(user=user, team=team, cluster=cluster, job_requests=[job_request])[0]


class JobsRefused(Exception):
    """Some jobs of a batch break a rule: ``per_job`` holds each job's refusals by field, in
    the batch's order (empty for a job that breaks none). Nothing was stored."""

    def __init__(self, per_job: list[Errors]):
        super().__init__(f"{sum(1 for errors in per_job if errors)} jobs refused")
        self.per_job = per_job

    def field_errors(self) -> list[dict[str, list[str]]]:
        """Each job's refusals as a 400 names a field's: a list of messages."""
        return [field_errors(errors) for errors in self.per_job]


def job_submit_many(
    *, user: User, team: Team, cluster: Cluster, job_requests: Sequence[JobRequest]
) -> list[GpuJob]:
    """Store many jobs of one team on one cluster at once (a sweep), all or none: each is held
    to every rule ``job_submit`` holds one to (``JobsRefused`` names each job's bad fields), and
    under quota only they must fit what the team's quota leaves together (a ValidationError
    under ``jobs``), checked under the team's row lock once. After commit they are created on
    the cluster in shares, side by side (``enqueue_submits``)."""
    _check_may_submit(user, team)
    per_job = admission.submission_refusals(team=team, cluster=cluster, job_requests=job_requests)
    if any(per_job):
        raise JobsRefused(per_job)
    return _store(
        user=user,
        team=team,
        cluster=cluster,
        job_requests=job_requests,
        asking=f"these {len(job_requests)} jobs ask for",
        field="jobs",
    )


def _check_may_submit(user: User, team: Team) -> None:
    if not can_run_workloads(user, team):
        raise PermissionDenied(f"Only leads and members of {team.slug} can run jobs there.")


def _store(
    *,
    user: User,
    team: Team,
    cluster: Cluster,
    job_requests: Sequence[JobRequest],
    asking: str = "this job asks for",
    field: str = "gpus",
) -> list[GpuJob]:
    """Write the admitted jobs (queued) and their audit events in one transaction, and enqueue
    their creation after commit. Under quota only, their GPUs of each kind must fit what the
    team's quota leaves, checked under the team's row lock."""
    now = timezone.now()
    with transaction.atomic():
        # Lock the team's row: two submissions at once must not both fit in the same quota.
        Team.objects.select_for_update().get(pk=team.pk)
        held = _member_holds(user=user, team=team, cluster=cluster, job_requests=job_requests)
        asked: dict[str, int] = {}
        for request in job_requests:
            if not queueing.queue_for(cluster, request.priority):
                asked[request.gpu_resource] = asked.get(request.gpu_resource, 0) + request.gpus
        for gpu_resource, gpus in sorted(asked.items()):
            check_quota(
                team=team,
                cluster=cluster,
                gpu_resource=gpu_resource,
                gpus=gpus,
                asking=asking,
                field=field,
            )
        jobs = GpuJob.objects.bulk_create(
            GpuJob(
                team=team,
                cluster=cluster,
                submitted_by=user,
                state=State.QUEUED,
                reason=Reason.MEMBER_LIMIT if index in held else "",
                message=member_holds.held_message(held[index])
                if index in held
                else member_holds.SENT_MESSAGE,
                state_changed_at=now,
                queue_name=queueing.queue_for(cluster, request.priority),
                **request.model_fields(),
            )
            for index, request in enumerate(job_requests)
        )
        audit_each(
            actor=user,
            action=AuditEvent.Action.GPU_JOB_SUBMITTED,
            team=team,
            changes=[(job, None, _job_snapshot(job)) for job in jobs],
        )
        job_ids = [job.pk for index, job in enumerate(jobs) if index not in held]
        if job_ids:
            transaction.on_commit(lambda: enqueue_submits(job_ids=job_ids))
    return jobs


def _member_holds(
    *, user: User, team: Team, cluster: Cluster, job_requests: Sequence[JobRequest]
) -> dict[int, str]:
    """The jobs of the batch beyond the member's own limit (index -> why), which wait in the
    portal on a Kueue cluster (``member_holds``); under quota only the batch is refused (400).
    Jobs count in order."""
    limit = member_limits.limit_of(team=team, cluster=cluster, user=user)
    if limit is None:
        return {}
    use = member_limits.member_use(team=team, cluster=cluster, user=user)
    before = MemberUse()
    held: dict[int, str] = {}
    # A new job never overtakes the member's jobs that wait already, nor one earlier in the
    # batch: once one waits, every later one does, for the same reason.
    waiting = None
    if member_holds.held_jobs().filter(team=team, cluster=cluster, submitted_by=user).exists():
        waiting = f"{member_limits.MEMBER_LIMIT_REACHED}: earlier jobs of yours wait first."
    for index, request in enumerate(job_requests):
        reason = waiting or member_limits.over_limit(
            team=team,
            cluster=cluster,
            user=user,
            gpus=request.gpus,
            use=use,
            before=before,
            limit=limit,
        )
        if reason is None:
            before = MemberUse(before.gpus + request.gpus, before.running + 1)
            continue
        if not queueing.queue_for(cluster, request.priority):
            field = "gpus" if len(job_requests) == 1 else "jobs"
            raise ValidationError({field: reason})
        held[index] = waiting = reason
    return held


def job_cancel(*, actor: User, job: GpuJob) -> GpuJob:
    """Stop the job: it shows cancelled at once, and its Job and pods are deleted after commit."""
    if not can_stop_job(actor, job):
        raise PermissionDenied(f"Only leads and members of {job.team.slug} can stop its jobs.")
    with transaction.atomic():
        locked = GpuJob.objects.select_for_update().get(pk=job.pk)
        if locked.state in FINAL_STATES:
            raise InvalidTransition(
                f"Cannot stop job #{locked.pk}: it is already {locked.state}.",
                current_state=locked.state,
            )
        before = _job_snapshot(locked)
        now = timezone.now()
        locked.state = State.CANCELLED
        locked.reason = Reason.CANCELLED
        locked.message = f"Stopped by {actor.get_username()}."
        locked.cancelled_by = actor
        locked.finished_at = now
        locked.state_changed_at = now
        locked.save(
            update_fields=[
                "state",
                "reason",
                "message",
                "cancelled_by",
                "finished_at",
                "state_changed_at",
            ]
        )
        audit(
            actor=actor,
            action=AuditEvent.Action.GPU_JOB_CANCELLED,
            target=locked,
            team=locked.team,
            before=before,
            after=_job_snapshot(locked),
        )
        job_id = locked.pk
        transaction.on_commit(lambda: enqueue_delete(job_id=job_id))
        member_holds.release_after_commit_of(locked)
    return locked
