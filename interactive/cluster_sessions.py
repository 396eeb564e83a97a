"""What the worker does on the cluster for a session: make its run (the member's home volume, the
token Secret, the run's Job), or delete a run's Job. Called by ``interactive.tasks`` with ids;
both are safe to run twice (the objects' names come from the ids; creating finds an earlier
attempt's, applying changes nothing twice).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils import timezone

from clusters.kube import (
    ClusterNotConfigured,
    KubeError,
    NotFound,
    QuotaExceeded,
    TransientKubeError,
)
from clusters.vocabulary import MANAGED_BY_LABEL, TEAM_LABEL
from clusters.workloads import WorkloadClient
from interactive import manifests
from interactive.models import HomeVolume, InteractiveSession
from reconcile.namespaces import check_namespace_owned
from workloads.manifests import cluster_placement
from workloads.pod_states import QUOTA_USED_UP, Reason

logger = logging.getLogger(__name__)
State = InteractiveSession.State


def _ours(obj: dict | None, namespace: str) -> bool:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return (
        labels.get(MANAGED_BY_LABEL) == settings.PORTAL_NAME and labels.get(TEAM_LABEL) == namespace
    )


def _fail(session_id: int, run: int, *, reason: str, message: str) -> None:
    now = timezone.now()
    InteractiveSession.objects.filter(pk=session_id, run=run, state=State.QUEUED).update(
        state=State.FAILED, reason=reason, message=message, state_changed_at=now, stopped_at=now
    )


def session_create_on_cluster(*, session_id: int, kube: WorkloadClient | None = None) -> str:
    """Make the session's current run on its cluster. Returns what happened, in words."""
    session = (
        InteractiveSession.objects.select_related("team", "cluster", "owner")
        .filter(pk=session_id)
        .first()
    )
    if session is None or session.state != State.QUEUED:
        return "not queued"
    run, namespace = session.run, session.team.slug
    home = HomeVolume.objects.get(team=session.team, cluster=session.cluster, owner=session.owner)
    spec = manifests.stored_session_spec(session, home_gib=home.size_gib)
    placement = cluster_placement(session.cluster)
    try:
        kube = kube or WorkloadClient.for_cluster(session.cluster)
        check_namespace_owned(kube, slug=namespace)
        claim = manifests.home_claim_manifest(spec, placement)
        existing = kube.get("PersistentVolumeClaim", claim["metadata"]["name"], namespace)
        if existing is not None and not _ours(existing, namespace):
            _fail(
                session_id,
                run,
                reason=Reason.SUBMIT_FAILED,
                message=f"A volume claim named {claim['metadata']['name']} already exists in "
                f"namespace {namespace} and was not made by the portal; it is left alone.",
            )
            return "home claim taken"
        if existing is None:
            kube.apply(claim)
        kube.apply(manifests.token_secret_manifest(spec, placement, session.token))
        job, created = kube.create_job(manifests.job_manifest(spec, placement))
    except TransientKubeError as error:
        InteractiveSession.objects.filter(pk=session_id, run=run, state=State.QUEUED).update(
            message=f"Not on the cluster yet; trying again: {error}"
        )
        raise
    except QuotaExceeded as error:
        _fail(session_id, run, reason=Reason.EXCEEDED_QUOTA, message=f"{QUOTA_USED_UP}: {error}")
        return "refused by the cluster's quota"
    except KubeError as error:
        message = str(error)
        if isinstance(error, NotFound) and error.details.get("kind") == "namespaces":
            message = (
                f"Team {namespace} has no namespace on cluster {session.cluster.name} yet (no "
                f"active quota there). {error}"
            )
        if isinstance(error, ClusterNotConfigured):
            message = f"The portal cannot reach cluster {session.cluster.name}: {error}"
        _fail(session_id, run, reason=Reason.SUBMIT_FAILED, message=message)
        return f"failed: {message}"
    if not created and not _ours(job, namespace):
        _fail(
            session_id,
            run,
            reason=Reason.SUBMIT_FAILED,
            message=f"A Job named {job['metadata']['name']} already exists in namespace "
            f"{namespace} and was not made by the portal; it is left alone.",
        )
        return "name taken"
    now = timezone.now()
    marked = InteractiveSession.objects.filter(pk=session_id, run=run, state=State.QUEUED).update(
        state=State.STARTING,
        started_at=now,
        state_changed_at=now,
        reason="",
        message=(
            f"Waiting in the team's {session.queue_name} queue for Kueue to admit it."
            if session.queue_name
            else "Starting its server."
        ),
    )
    if marked:
        return "created" if created else "found created by an earlier attempt"
    current = InteractiveSession.objects.get(pk=session_id)
    if current.run != run or current.state not in (State.STARTING, State.RUNNING):
        # Stopped while it was being made: the stop wins.
        kube.delete_job(namespace, manifests.job_name(session_id, run), propagation="Background")
        return "stopped meanwhile; deleted again"
    return "created (the watcher saw it first)"


def session_run_delete(*, session_id: int, run: int, kube: WorkloadClient | None = None) -> bool:
    """Delete a run's Job and its pod (the home volume and the token Secret stay)."""
    session = InteractiveSession.objects.select_related("team", "cluster").get(pk=session_id)
    kube = kube or WorkloadClient.for_cluster(session.cluster)
    return kube.delete_job(
        session.team.slug, manifests.job_name(session_id, run), propagation="Background"
    )
