"""What a session's run is, from its Job and pod as the cluster shows them, written to its row.

``observe`` is pure: the run's Job and pods -> state, reason, words, node and the server's
address. ``record`` writes an observation to the session if it is still on that run and still
active (a stopped session is never brought back by a late event). The watcher
(``interactive.watcher``) calls ``record_cluster`` with what it holds of a cluster; the
periodic ``resync_cluster`` lists the same from the cluster.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from clusters.workloads import WorkloadClient
from interactive import events, manifests
from interactive.models import ACTIVE_STATES, InteractiveSession
from workloads.pod_states import Reason, metadata_of, pod_waiting_reason, status_of

State = InteractiveSession.State
StopReason = InteractiveSession.StopReason
KINDS = ("Job", "Pod")
# A run whose Job the cluster does not show this long after it was made is gone (deleted by
# someone): long enough for a list begun before the create to miss it.
JOB_GONE_AFTER = datetime.timedelta(seconds=30)


@dataclass(frozen=True)
class Observation:
    state: str
    reason: str = ""
    message: str = ""
    node: str = ""
    server_address: str = ""
    stop_reason: str = ""


def object_selectors(kind: str) -> dict:
    return {"label_selector": manifests.ownership_selector(settings.PORTAL_NAME)}


def _condition(obj: dict, kind: str) -> dict | None:
    return next(
        (
            c
            for c in status_of(obj).get("conditions") or []
            if c.get("type") == kind and c.get("status") == "True"
        ),
        None,
    )


def _pod_ready(pod: dict) -> bool:
    return _condition(pod, "Ready") is not None


def _exit_words(pods: list[dict]) -> str:
    for pod in pods:
        for container in status_of(pod).get("containerStatuses") or []:
            ended = (container.get("state") or {}).get("terminated") or {}
            if ended:
                words = f"its server exited with code {ended.get('exitCode')}"
                if ended.get("reason"):
                    words += f" ({ended['reason']})"
                return words
    return "its pod ended"


def observe(job: dict | None, pods: list[dict], *, port: int) -> Observation | None:
    """The run's state from its Job and pods; None when the Job is not there (the caller tells
    a Job not made yet from one deleted)."""
    if job is None:
        return None
    if _condition(job, "Complete"):
        return Observation(
            State.STOPPED,
            reason=Reason.COMPLETED,
            message="Its server was shut down from inside; the home volume is kept. Resume it "
            "to go on.",
            stop_reason=StopReason.OWNER,
        )
    failed = _condition(job, "Failed")
    if failed:
        if failed.get("reason") == Reason.DEADLINE_EXCEEDED:
            return Observation(
                State.STOPPED,
                reason=Reason.DEADLINE_EXCEEDED,
                message="Reached its maximum lifetime; the home volume is kept. Resume it to "
                "go on.",
                stop_reason=StopReason.LIFETIME,
            )
        return Observation(
            State.FAILED,
            reason=failed.get("reason") or "Failed",
            message=f"The run ended: {_exit_words(pods)}. Its log is on the session's page; "
            "resume it to start again.",
        )
    if (job.get("spec") or {}).get("suspend"):
        return Observation(
            State.STARTING,
            reason=Reason.IN_QUEUE,
            message="Waiting in the team's guaranteed queue for Kueue to admit it.",
        )
    live = [p for p in pods if not metadata_of(p).get("deletionTimestamp")]
    if not live:
        return Observation(State.STARTING, reason=Reason.STARTING, message="Making its pod.")
    pod = live[0]
    node = (pod.get("spec") or {}).get("nodeName") or ""
    address = status_of(pod).get("podIP") or ""
    if status_of(pod).get("phase") == "Running" and _pod_ready(pod) and address:
        return Observation(
            State.RUNNING,
            message="Its server is up: open it.",
            node=node,
            server_address=f"{address}:{port}",
        )
    reason, words = pod_waiting_reason(pod)
    if status_of(pod).get("phase") == "Running":
        reason, words = Reason.STARTING, f"Its server is starting on node {node}."
    return Observation(State.STARTING, reason=reason, message=words, node=node)


def record(session_id: int, run: int, observation: Observation) -> bool:
    """Write the observation if the session is still on that run and active; whether it
    changed anything."""
    now = timezone.now()
    with transaction.atomic():
        session = (
            InteractiveSession.objects.select_for_update()
            .filter(pk=session_id, run=run, state__in=ACTIVE_STATES)
            .exclude(state=State.QUEUED)
            .first()
        )
        if session is None:
            return False
        fields = {
            "state": observation.state,
            "reason": observation.reason,
            "message": observation.message,
            "node": observation.node or session.node,
            "server_address": observation.server_address,
        }
        if all(getattr(session, name) == value for name, value in fields.items()):
            return False
        if session.state != observation.state:
            fields["state_changed_at"] = now
        if observation.state in (State.STOPPED, State.FAILED):
            fields["stopped_at"] = now
            fields["stop_reason"] = observation.stop_reason
        for name, value in fields.items():
            setattr(session, name, value)
        session.save(update_fields=list(fields))
        if observation.state in (State.STOPPED, State.FAILED):
            events.session_stopped(session)
    return True


def record_cluster(cluster_id: int, jobs: dict[str, dict], pods: dict[str, list[dict]]) -> int:
    """Write every active session of the cluster from its runs' Jobs and pods (by Job name);
    how many changed. A run whose Job is gone a while after it was made failed."""
    changed = 0
    now = timezone.now()
    sessions = InteractiveSession.objects.filter(
        cluster_id=cluster_id, state__in=[State.STARTING, State.RUNNING]
    ).only("pk", "run", "state_changed_at", "started_at")
    for session in sessions:
        name = manifests.job_name(session.pk, session.run)
        job = jobs.get(name)
        observation = observe(job, pods.get(name, []), port=settings.SESSIONS_SERVER_PORT)
        if observation is None:
            made = session.started_at or session.state_changed_at or now
            if now - made < JOB_GONE_AFTER:
                continue
            observation = Observation(
                State.FAILED,
                reason=Reason.JOB_GONE,
                message="Its Job was deleted on the cluster. Resume it to start again.",
            )
        changed += record(session.pk, session.run, observation)
    return changed


def job_name_of_pod(pod: dict) -> str:
    return (metadata_of(pod).get("labels") or {}).get("job-name", "")


def resync_cluster(cluster: Cluster, kube: WorkloadClient | None = None) -> dict:
    """List the cluster's session Jobs and pods and write every active session from them."""
    kube = kube or WorkloadClient.for_cluster(cluster)
    selector = manifests.ownership_selector(settings.PORTAL_NAME)
    listed = kube.list_objects("Job", label_selector=selector).items
    jobs = {metadata_of(job).get("name", ""): job for job in listed}
    return {
        "changed": record_cluster(
            cluster.pk, jobs, pods_by_job(kube.list_objects("Pod", label_selector=selector).items)
        )
    }


def pods_by_job(pods) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for pod in pods:
        grouped.setdefault(job_name_of_pod(pod), []).append(pod)
    return grouped
