"""Changes to GPU jobs: submit, cancel, create on the cluster, delete from it, and requeue.
Views, serializers and tasks call these.

``job_submit`` and ``job_cancel`` check first (``PermissionDenied``, ``ValidationError`` naming
every bad field, ``InvalidTransition``) and then write in one transaction, enqueueing the
cluster work after commit. The cluster side (``job_create_on_cluster``,
``job_delete_from_cluster``) is safe to run twice: the Job's name comes from the job's id, a
second create finds the first one, and a worker claims a job with a conditional update before
creating it. What the cluster then shows is recorded by ``recording``.
"""

from __future__ import annotations

import datetime
import logging

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
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
)
from clusters.models import Cluster
from clusters.vocabulary import JOB_ID_LABEL, MANAGED_BY_LABEL, TEAM_LABEL
from clusters.workloads import WorkloadClient
from gpujobs import admission, manifests, selectors
from gpujobs.models import GpuJob
from gpujobs.observe import FINAL_STATES, QUOTA_USED_UP, Reason
from gpujobs.permissions import can_stop_job, can_submit_jobs
from gpujobs.recording import record_finished
from gpujobs.specs import JobRequest
from tenants.audit import audit
from tenants.errors import InvalidTransition
from tenants.models import AuditEvent, Team
from tenants.namespaces import check_namespace_owned
from tenants.reconcile_triggers import request_reconcile_after_commit

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
    if not can_submit_jobs(user, team):
        raise PermissionDenied(f"Only leads and members of {team.slug} can run jobs there.")
    admission.check_job(team=team, cluster=cluster, request=job_request)
    with transaction.atomic():
        # Lock the team's row: two submissions at once must not both fit in the same quota.
        Team.objects.select_for_update().get(pk=team.pk)
        admission.check_quota(
            team=team,
            cluster=cluster,
            gpu_resource=job_request.gpu_resource,
            gpus=job_request.gpus,
        )
        job = GpuJob.objects.create(
            team=team,
            cluster=cluster,
            submitted_by=user,
            state=State.QUEUED,
            message="Waiting for a worker to create it on the cluster.",
            state_changed_at=timezone.now(),
            **job_request.model_fields(),
        )
        audit(
            actor=user,
            action=AuditEvent.Action.GPU_JOB_SUBMITTED,
            target=job,
            team=team,
            before=None,
            after=_job_snapshot(job),
        )
        job_id = job.pk
        transaction.on_commit(lambda: enqueue_submit(job_id=job_id))
    return job


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


def _send(task, **kwargs) -> None:
    """Send a task; if the broker is unreachable, log it: the periodic resync catches up."""
    try:
        task.delay(**kwargs)
    except OperationalError:
        logger.exception("Could not enqueue %s(%s); the resync will", task.name, kwargs)


def enqueue_submit(*, job_id: int) -> None:
    from gpujobs.tasks import submit_job  # tasks import this module

    _send(submit_job, job_id=job_id)


def enqueue_delete(*, job_id: int) -> None:
    from gpujobs.tasks import delete_job

    _send(delete_job, job_id=job_id)


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


def job_create_on_cluster(*, job_id: int, kube: WorkloadClient | None = None) -> str:
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
    try:
        kube = kube or WorkloadClient.for_cluster(job.cluster)
        # Never a Job in a namespace of the team's name that someone else made (raises
        # NamespaceNotOwned); one not there yet is the "not found" below.
        check_namespace_owned(kube, slug=job.team.slug)
        job_obj, created = kube.create_job(manifests.stored_job_manifest(job))
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
        message="Created on the cluster; waiting for the job controller.",
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
    for job_id in ids:
        enqueue_submit(job_id=job_id)
    return ids
