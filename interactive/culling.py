"""Idle sessions: warned, then stopped, by a rule their owners can read on the session's page.

A running session is idle when both hold:

* its server reports no activity: JupyterLab's ``api/status`` gives the server's last activity
  (pages, kernels, terminals) and ``api/kernels`` each kernel's execution state; a busy kernel is
  activity now, whatever the clock says;
* its GPUs are idle: under the cluster's idle threshold over its idle window, by DCGM through
  Prometheus (``monitoring.metrics.pod_usage``); a CPU session has none to be busy.

Idle since the later of its server's last activity and the start of its run, it is warned
(the session's page, a notification, a webhook event) once ``idle_minutes - warn_minutes`` have
passed, and stopped (its home volume kept) ``idle_minutes`` after, and never sooner than
``warn_minutes`` after the warning. Activity clears the warning. What the portal cannot read
(the server does not answer, Prometheus is down) is never taken for idleness.

This is the rule of JupyterHub's idle culler (the server's activity) and Kubeflow's notebook
culler (``api/kernels`` execution state), with the GPUs' own utilisation added: a notebook whose
kernel trains on the GPU for an hour without output is busy.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass

import httpx
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from interactive import manifests
from interactive.culling_view import clock, stop_time
from interactive.models import InteractiveSession, SessionPolicy, policy_for
from interactive.services import session_stop
from monitoring.metrics import pod_usage, prometheus_for
from monitoring.models import Notification
from monitoring.prometheus import PrometheusError
from tenants.errors import InvalidTransition
from tenants.events import EventKind, emit
from workloads.pod_states import parse_time

logger = logging.getLogger(__name__)
State = InteractiveSession.State
SERVER_TIMEOUT = httpx.Timeout(5.0)


@dataclass(frozen=True)
class ServerActivity:
    """What the server said: when it was last active, and whether a kernel is busy now."""

    last_activity: datetime.datetime | None
    busy: bool
    kernels: int = 0


def server_activity(session: InteractiveSession) -> ServerActivity | None:
    """Ask the session's server (None when it does not answer)."""
    base = f"http://{session.server_address}{manifests.base_path(session.pk)}"
    headers = {"Authorization": f"token {session.token}"}
    try:
        with httpx.Client(timeout=SERVER_TIMEOUT, headers=headers) as client:
            status = client.get(f"{base}api/status", params={"no_track_activity": "1"})
            kernels = client.get(f"{base}api/kernels", params={"no_track_activity": "1"})
        status.raise_for_status()
        kernels.raise_for_status()
        return activity_of(status.json(), kernels.json())
    except (httpx.HTTPError, ValueError) as error:
        logger.info("session %s: the server did not say how active it is: %s", session.pk, error)
        return None


def activity_of(status: dict, kernels: list) -> ServerActivity:
    """The activity in JupyterLab's answers (pure)."""
    times = [parse_time(status.get("last_activity"))]
    busy = False
    for kernel in kernels if isinstance(kernels, list) else []:
        times.append(parse_time(kernel.get("last_activity")))
        busy = busy or kernel.get("execution_state") == "busy"
    known = [t for t in times if t is not None]
    return ServerActivity(
        last_activity=max(known) if known else None,
        busy=busy,
        kernels=len(kernels) if isinstance(kernels, list) else 0,
    )


@dataclass(frozen=True)
class Verdict:
    """What the rule says of a session now: idle since when (None: in use), when it is warned
    and when stopped, and why, in words for its page."""

    idle_since: datetime.datetime | None
    warn_at: datetime.datetime | None
    stop_at: datetime.datetime | None
    why: str


def judge(
    *,
    started_at: datetime.datetime,
    activity: ServerActivity,
    gpus_idle: bool,
    warned_at: datetime.datetime | None,
    policy: SessionPolicy,
) -> Verdict:
    """The rule, pure: see the module's docstring."""
    if activity.busy:
        return Verdict(None, None, None, "A kernel is running code.")
    if not gpus_idle:
        return Verdict(None, None, None, "Its GPUs are busy.")
    since = max(t for t in (activity.last_activity, started_at) if t is not None)
    warn_at = stop_time(since, None, policy) - datetime.timedelta(minutes=policy.warn_minutes)
    stop_at = stop_time(since, warned_at, policy)
    return Verdict(
        since,
        warn_at,
        stop_at,
        f"No activity in its server since {clock(since)}"
        + (" and its GPUs are idle" if gpus_idle else "")
        + f"; the team stops sessions idle {policy.idle_minutes} minutes.",
    )


def gpu_idleness(cluster: Cluster) -> dict[str, bool] | None:
    """Pod name -> idle, for the cluster's GPU pods; None when Prometheus does not answer."""
    try:
        with prometheus_for(cluster) as prometheus:
            return {usage.pod: usage.idle for usage in pod_usage(prometheus, cluster)}
    except PrometheusError as error:
        logger.warning("cluster %s: GPU use unknown, no session culled: %s", cluster.name, error)
        return None


def gpus_idle(session: InteractiveSession, idle_pods: dict[str, bool] | None) -> bool:
    """A CPU session's GPUs are idle; a GPU session's when DCGM says its pod's are."""
    if not session.gpus:
        return True
    if idle_pods is None:
        return False
    prefix = f"{manifests.job_name(session.pk, session.run)}-"
    return any(idle for pod, idle in idle_pods.items() if pod.startswith(prefix))


def check_cluster(cluster: Cluster, *, now: datetime.datetime | None = None) -> dict[str, int]:
    """Judge every running session of the cluster, warn and stop as the rule says."""
    now = now or timezone.now()
    sessions = list(
        InteractiveSession.objects.filter(cluster=cluster, state=State.RUNNING).select_related(
            "team", "team__session_policy", "owner", "cluster"
        )
    )
    counts = {"checked": 0, "warned": 0, "stopped": 0}
    idle_pods = gpu_idleness(cluster) if any(s.gpus for s in sessions) else {}
    for session in sessions:
        activity = server_activity(session) if session.server_address else None
        if activity is None:
            continue
        counts["checked"] += 1
        if (
            session.warned_at
            and activity.last_activity
            and activity.last_activity > session.warned_at
        ):
            session.warned_at = None  # used since the warning: the warning is void
        verdict = judge(
            started_at=session.started_at or session.state_changed_at or now,
            activity=activity,
            gpus_idle=gpus_idle(session, idle_pods),
            warned_at=session.warned_at,
            policy=policy_for(session.team),
        )
        outcome = apply_verdict(session, activity=activity, verdict=verdict, now=now)
        if outcome:
            counts[outcome] += 1
    return counts


def apply_verdict(
    session: InteractiveSession, *, activity: ServerActivity, verdict: Verdict, now
) -> str:
    """Record the verdict on the session; warn or stop it when due. Returns "warned",
    "stopped" or ""."""
    if verdict.stop_at is not None and session.warned_at is not None and now >= verdict.stop_at:
        try:
            session_stop(
                actor=None,
                session=session,
                reason=InteractiveSession.StopReason.IDLE,
                message=f"Stopped as idle: {verdict.why} The home volume is kept; resume it to "
                "go on.",
            )
        except InvalidTransition:
            return ""
        return "stopped"
    warn = verdict.warn_at is not None and session.warned_at is None and now >= verdict.warn_at
    with transaction.atomic():
        updated = InteractiveSession.objects.filter(pk=session.pk, run=session.run).update(
            last_activity_at=activity.last_activity,
            idle_since=verdict.idle_since,
            idle_checked_at=now,
            warned_at=(now if warn else session.warned_at) if verdict.idle_since else None,
        )
        if warn and updated:
            _warn(session, verdict)
    return "warned" if warn and updated else ""


def _warn(session: InteractiveSession, verdict: Verdict) -> None:
    link = f"/interactive/{session.pk}/"
    subject = f"Session {session.name} will be stopped as idle at {clock(verdict.stop_at)}"
    body = f"{verdict.why} Use it (run a cell) to keep it, or stop it yourself."
    Notification.objects.create(
        user=session.owner,
        team=session.team,
        kind=Notification.Kind.IDLE_WARNING,
        subject=subject,
        body=body,
        link=link,
    )
    emit(
        team_id=session.team_id,
        kind=EventKind.SESSION_IDLE,
        title=subject,
        data={
            "session_id": session.pk,
            "owner": session.owner.get_username(),
            "stop_at": verdict.stop_at.isoformat() if verdict.stop_at else None,
        },
        link=link,
    )


def check_all(*, now: datetime.datetime | None = None) -> dict[str, dict[str, int]]:
    clusters = Cluster.objects.filter(sessions__state=State.RUNNING).distinct()
    return {cluster.name: check_cluster(cluster, now=now) for cluster in clusters}


def stop_idle_pod(cluster: Cluster, namespace: str, session_id: str) -> None:
    """The team's idle-pod policy (``monitoring.idle``) stops a session through the portal,
    like the session's own culling: the home volume is kept."""
    from clusters.pods import StopRefused

    session = (
        InteractiveSession.objects.filter(
            pk=int(session_id) if session_id.isdigit() else 0,
            cluster=cluster,
            team__slug=namespace,
            state__in=[State.STARTING, State.RUNNING],
        )
        .select_related("team")
        .first()
    )
    if session is None:
        raise StopRefused(f"No running session #{session_id} in {namespace}.")
    session_stop(actor=None, session=session, reason=InteractiveSession.StopReason.IDLE)
