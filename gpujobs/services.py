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

import datetime
import logging
from collections.abc import Sequence

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import OperationalError

from clusters.kube import (
    ClusterNotConfigured,
    KubeError,
    NotFound,
    QuotaExceeded,
    TransientKubeError,
    WebhookUnavailable,
)
from clusters.models import Cluster, QuotaMode
from clusters.vocabulary import JOB_ID_LABEL, MANAGED_BY_LABEL, TEAM_LABEL
from clusters.workloads import WorkloadClient
from gpujobs import admission, cluster_reads, manifests, selectors
from gpujobs.models import GpuJob
from gpujobs.observe import FINAL_STATES, waits_in_the_other_mode
from gpujobs.permissions import can_stop_job
from gpujobs.recording import record_finished
from gpujobs.specs import JobRequest
from tenants.audit import audit, audit_each
from tenants.errors import InvalidTransition
from tenants.models import AuditEvent, Team
from tenants.namespaces import check_namespace_owned
from tenants.reconcile_triggers import request_reconcile_after_commit
from workloads.admission import field_errors
from workloads.permissions import can_run_workloads
from workloads.pod_states import QUOTA_USED_UP, Reason
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
        asked: dict[str, int] = {}
        for request in job_requests:
            if not queue_for(cluster, request.priority):
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
                message="Waiting for a worker to create it on the cluster.",
                state_changed_at=now,
                queue_name=queue_for(cluster, request.priority),
                **request.model_fields(),
            )
            for request in job_requests
        )
        audit_each(
            actor=user,
            action=AuditEvent.Action.GPU_JOB_SUBMITTED,
            team=team,
            changes=[(job, None, _job_snapshot(job)) for job in jobs],
        )
        job_ids = [job.pk for job in jobs]
        transaction.on_commit(lambda: enqueue_submits(job_ids=job_ids))
    return jobs


def queue_for(cluster: Cluster, priority: str) -> str:
    """The team's LocalQueue a job of that kind of work is created in on the cluster now: the
    one named after its kind under Kueue, none under quota only."""
    return priority if cluster.quota_mode == QuotaMode.KUEUE else ""


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
    return locked


def _send(task, **kwargs) -> bool:
    """Send a task; if the broker is unreachable, log it (the periodic resync catches up) and
    say so."""
    try:
        task.delay(**kwargs)
    except OperationalError:
        logger.exception("Could not enqueue %s(%s); the resync will", task.name, kwargs)
        return False
    return True


# A batch's jobs are created by at most this many tasks side by side (a worker's threads, or
# several workers'), each creating its share one job after another: one message per share rather
# than per job.
SUBMIT_SHARES = 16


def submit_shares(job_ids: Sequence[int], *, at_most: int = SUBMIT_SHARES) -> list[list[int]]:
    """``job_ids`` in order, cut into at most ``at_most`` shares of nearly equal length."""
    count = min(len(job_ids), at_most)
    if count == 0:
        return []
    size, longer = divmod(len(job_ids), count)
    shares, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < longer else 0)
        shares.append(list(job_ids[start:end]))
        start = end
    return shares


def enqueue_submits(*, job_ids: Sequence[int]) -> None:
    """Send the tasks that create the jobs' Jobs: each job alone (``submit_job``), or a batch
    in shares (``submit_jobs``). If the broker is unreachable, that is logged once: the
    periodic resync enqueues the rest."""
    from gpujobs.tasks import submit_job, submit_jobs  # tasks import this module

    for share in submit_shares(job_ids):
        sent = (
            _send(submit_job, job_id=share[0])
            if len(share) == 1
            else _send(submit_jobs, job_ids=share)
        )
        if not sent:
            return  # the broker is away: the rest would fail alike


def enqueue_delete(*, job_id: int) -> None:
    from gpujobs.tasks import delete_job

    _send(delete_job, job_id=job_id)


def enqueue_requeue(*, job_id: int) -> None:
    from gpujobs.tasks import requeue_job_for_mode

    _send(requeue_job_for_mode, job_id=job_id)


def _owned_by(job_obj: dict, job: GpuJob) -> bool:
    labels = (job_obj.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(JOB_ID_LABEL) == str(job.pk)
        and labels.get(TEAM_LABEL) == job.team.slug
        and labels.get(MANAGED_BY_LABEL) == settings.PORTAL_NAME
    )


class NamespaceNotReady(TransientKubeError):
    """The team's namespace is not on the cluster yet although the team holds quota there: the
    submission is retried (with backoff, then by the periodic resync) while it is created."""


def job_create_on_cluster(
    *,
    job_id: int,
    kube: WorkloadClient | None = None,
    owned_namespaces: set[tuple[int, str]] | None = None,
) -> str:
    """Create the job's Job on its cluster, once. Returns what happened, in words.

    A worker claims the job first (a conditional update on ``queued`` and an expired claim), so
    two workers never create it at once; a worker that dies holding the claim leaves it to
    expire and the periodic resync enqueues the job again. Creating finds a Job of the same
    name made by an earlier attempt (AlreadyExists is success). Transient cluster errors are
    raised for the task to retry, with the claim released.
    """
    now = timezone.now()
    lease = now - datetime.timedelta(seconds=settings.GPUJOBS_CLAIM_SECONDS)
    claimed = GpuJob.objects.filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=lease), pk=job_id, state=State.QUEUED
    ).update(claimed_at=now, submit_attempts=F("submit_attempts") + 1)
    if claimed != 1:
        return "not queued, or another worker holds it"
    job = GpuJob.objects.select_related("team", "cluster", "submitted_by").get(pk=job_id)
    queue = queue_for(job.cluster, job.priority)
    if queue != job.queue_name:
        # The cluster's quota mode changed since the job was submitted: its Job follows the
        # mode the cluster has now.
        GpuJob.objects.filter(pk=job_id, claimed_at=now).update(queue_name=queue)
        job.queue_name = queue
    try:
        kube = kube or WorkloadClient.for_cluster(job.cluster)
        # Never a Job in a namespace of the team's name that someone else made (raises
        # NamespaceNotOwned); one not there yet is the "not found" below. A share of a batch,
        # created in a few seconds, reads each namespace once (``owned_namespaces``: the
        # (cluster, namespace) pairs it found the portal's).
        where = (job.cluster_id, job.team.slug)
        if owned_namespaces is None or where not in owned_namespaces:
            live = check_namespace_owned(kube, slug=job.team.slug)
            if live is not None and owned_namespaces is not None:
                owned_namespaces.add(where)
        job_obj, created = kube.create_job(manifests.stored_job_manifest(job))
    except WebhookUnavailable as error:
        # Kueue's webhooks refuse every Job while Kueue is down (failure policy Fail): the job
        # waits here, in the portal, and is created once Kueue answers again.
        GpuJob.objects.filter(pk=job_id, claimed_at=now).update(
            claimed_at=None,
            reason=Reason.KUEUE_NOT_ADMITTING,
            message=kueue_not_admitting(job.cluster, error),
        )
        raise
    except TransientKubeError as error:
        # Let the retry (or another worker) claim it again, and say why it still waits.
        GpuJob.objects.filter(pk=job_id, claimed_at=now).update(
            claimed_at=None, message=f"Not on the cluster yet; trying again: {error}"
        )
        raise
    except QuotaExceeded as error:
        record_finished(
            job_id,
            state=State.FAILED,
            reason=Reason.EXCEEDED_QUOTA,
            message=f"{QUOTA_USED_UP}: {error}",
            only_from=[State.QUEUED],
        )
        return "refused by the cluster's quota"
    except KubeError as error:
        message = str(error)
        if isinstance(error, NotFound) and error.details.get("kind") == "namespaces":
            if selectors.namespace_on_its_way(team_id=job.team_id, cluster_id=job.cluster_id):
                # Granted, but the reconcile that creates the namespace has not run yet (or the
                # cluster was rebuilt): ask for it now and try again, rather than fail the job.
                request_reconcile_after_commit(team_id=job.team_id, cluster_id=job.cluster_id)
                waiting = (
                    f"Waiting for team {job.team.slug}'s namespace on cluster {job.cluster.name}: "
                    "the portal is applying its quota there; trying again."
                )
                GpuJob.objects.filter(pk=job_id, claimed_at=now).update(
                    claimed_at=None, message=waiting
                )
                raise NamespaceNotReady(waiting) from error
            message = (
                f"Team {job.team.slug} has no namespace on cluster {job.cluster.name} (no active "
                f"quota there). {error}"
            )
        if isinstance(error, ClusterNotConfigured):
            message = f"The portal cannot reach cluster {job.cluster.name}: {error}"
        record_finished(
            job_id,
            state=State.FAILED,
            reason=Reason.SUBMIT_FAILED,
            message=message,
            only_from=[State.QUEUED],
        )
        return f"failed: {message}"
    metadata = job_obj.get("metadata") or {}
    if not created and not _owned_by(job_obj, job):
        record_finished(
            job_id,
            state=State.FAILED,
            reason=Reason.SUBMIT_FAILED,
            message=f"A Job named {metadata.get('name')} already exists in namespace "
            f"{job.team.slug} and was not made by the portal for this job; it is left "
            "alone.",
            only_from=[State.QUEUED],
        )
        return "name taken by someone else's Job"
    uid = metadata.get("uid") or ""
    # After the create returned: a list of Jobs begun later must hold this one (the watcher
    # relies on that to tell a deleted Job from one it has not seen yet).
    created_at = timezone.now()
    marked = GpuJob.objects.filter(pk=job_id, state=State.QUEUED).update(
        state=State.SUBMITTED,
        submitted_at=created_at,
        kube_uid=uid,
        state_changed_at=timezone.now(),
        reason="",
        message=(
            f"Created on the cluster in the team's {queue} queue; waiting for Kueue."
            if queue
            else "Created on the cluster; waiting for the job controller."
        ),
    )
    if marked:
        return "created" if created else "found created by an earlier attempt"
    current = GpuJob.objects.get(pk=job_id)
    if current.state == State.CANCELLED:
        # Stopped while it was being created: the stop wins.
        kube.delete_job(job.team.slug, job.kube_name, propagation="Background", uid=uid or None)
        return "cancelled meanwhile; deleted again"
    # The watcher saw the Job first and moved the row on; keep its uid and submission time.
    GpuJob.objects.filter(pk=job_id).update(
        kube_uid=uid, submitted_at=Coalesce(F("submitted_at"), created_at)
    )
    return "created (the watcher saw it first)"


def kueue_not_admitting(cluster: Cluster, error: Exception) -> str:
    return (
        f"Kueue on cluster {cluster.name} is not admitting: {error} The job waits in the portal "
        "and is created on the cluster once Kueue is back."
    )


def job_requeue_for_mode(*, job_id: int, kube: WorkloadClient | None = None) -> str:
    """Make a waiting job's Job again under its cluster's quota mode, once the mode changed
    under it; returns what happened, in words.

    A Job queued in Kueue stays suspended forever once its cluster is switched to quota only
    (its queue is gone, and Kueue forbids removing the queue label); a Job waiting outside
    Kueue on a cluster switched to Kueue would go around the queue. Nothing of either runs, so
    the Job is deleted and created again, under the same name, as the mode says now. The job
    goes back to ``queued`` first, with a claim (no worker creates it meanwhile) and the old
    Job's uid (what the watcher sees of the old Job no longer counts); a Job of which something
    runs, or one already in line with the mode, is left alone. Safe to run twice: the second
    run finds the new Job in line.
    """
    job = GpuJob.objects.select_related("team", "cluster", "submitted_by").get(pk=job_id)
    if job.state not in (State.QUEUED, State.SUBMITTED, State.PENDING) or not job.kube_uid:
        return "not waiting on the cluster"
    kube = kube or WorkloadClient.for_cluster(job.cluster)
    namespace, name, old_uid = job.team.slug, job.kube_name, job.kube_uid
    kueue = job.cluster.quota_mode == QuotaMode.KUEUE
    now = timezone.now()
    if job.state != State.QUEUED:
        current = kube.get_job(namespace, name)
        if current is None or (current.get("metadata") or {}).get("uid") != old_uid:
            return "its Job is gone"
        pods = cluster_reads.job_pods(job, kube=kube)
        if not waits_in_the_other_mode(current, pods, kueue=kueue):
            return "in line with the cluster's mode, or running"
        mode = "Kueue" if kueue else "quota only"
        taken = GpuJob.objects.filter(pk=job_id, state=job.state, kube_uid=old_uid).update(
            state=State.QUEUED,
            claimed_at=now,
            reason=Reason.QUOTA_MODE_CHANGED,
            message=f"Cluster {job.cluster.name} now enforces quota with {mode}: the job's Job "
            "is being made again for it.",
            state_changed_at=now,
        )
        if not taken:
            return "changed meanwhile"
    # Background: the Job goes at once (its pods, if any, after it), so the name is free.
    kube.delete_job(namespace, name, propagation="Background", uid=old_uid)
    if not GpuJob.objects.filter(pk=job_id, state=State.QUEUED, kube_uid=old_uid).update(
        claimed_at=None
    ):
        return "changed meanwhile"
    return job_create_on_cluster(job_id=job_id, kube=kube)


def job_delete_from_cluster(*, job_id: int, kube: WorkloadClient | None = None) -> bool:
    """Delete a cancelled job's Job and its pods (Foreground: the pods go first)."""
    job = GpuJob.objects.select_related("team", "cluster").filter(pk=job_id).first()
    if job is None or job.state != State.CANCELLED:
        return False
    kube = kube or WorkloadClient.for_cluster(job.cluster)
    return kube.delete_job(
        job.team.slug, job.kube_name, propagation="Foreground", uid=job.kube_uid or None
    )


def requeue_stuck_jobs(*, older_than_seconds: int | None = None) -> list[int]:
    """Enqueue again the queued jobs no worker is creating: their message was lost (a broker
    outage) or the worker that claimed them died. The claim makes a duplicate harmless."""
    now = timezone.now()
    age = older_than_seconds
    if age is None:
        age = settings.GPUJOBS_REQUEUE_AFTER_SECONDS
    lease = now - datetime.timedelta(seconds=settings.GPUJOBS_CLAIM_SECONDS)
    ids = list(
        GpuJob.objects.filter(
            Q(claimed_at__isnull=True) | Q(claimed_at__lt=lease),
            state=State.QUEUED,
            created_at__lte=now - datetime.timedelta(seconds=age),
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    enqueue_submits(job_ids=ids)
    return ids
