"""What the worker does on the cluster for a job: create its Job (once, in the team's namespace,
owned by the portal), delete it, or make it again under the cluster's current quota mode. Called
by the Celery tasks (``gpujobs.tasks``) with a job's id; the writes to the job's row that record
the outcome are here too.
"""

from __future__ import annotations

import datetime
import logging

from django.conf import settings
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

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
from gpujobs import cluster_reads, manifests, selectors
from gpujobs.models import GpuJob
from gpujobs.observe import waits_in_the_other_mode
from gpujobs.recording import record_finished
from reconcile.namespaces import check_namespace_owned
from tenants.reconcile_triggers import request_reconcile_after_commit
from workloads import queueing
from workloads.pod_states import QUOTA_USED_UP, Reason

logger = logging.getLogger(__name__)
State = GpuJob.State


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
    # A job waiting for its member's own limit is not created (``member_holds`` releases it).
    claimed = (
        GpuJob.objects.filter(
            Q(claimed_at__isnull=True) | Q(claimed_at__lt=lease), pk=job_id, state=State.QUEUED
        )
        .exclude(reason=Reason.MEMBER_LIMIT)
        .update(claimed_at=now, submit_attempts=F("submit_attempts") + 1)
    )
    if claimed != 1:
        return "not queued, or another worker holds it"
    job = GpuJob.objects.select_related("team", "cluster", "submitted_by").get(pk=job_id)
    queue = queueing.queue_for(job.cluster, job.priority)
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
