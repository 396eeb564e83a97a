"""Recording what the cluster shows on the jobs' rows: the writes of the watcher and the periodic
resync (through ``tracker``), and the submit task's own end of a job it could not create.

``observe`` reads the cluster's JSON into an ``Observation`` (pure); this module decides what an
observation changes on a row (``changes_to_record``, pure) and writes it, conditional on the
state the row was read in, so that a stop is never undone and states only move forward.

Kueue's facts (admitted when and on which flavor, preemptions) are kept once learned: Kueue
clears a Workload's preemption condition when it admits it again, so the job's row is where the
last preemption (when, why, by whom) stays on record.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from gpujobs import member_holds, selectors
from gpujobs.models import GpuJob
from gpujobs.observe import FINAL_STATES, Observation
from monitoring.models import Notification
from tenants.events import EventKind, emit
from workloads.pod_states import Reason

State = GpuJob.State

# How far states move: observations never take a job back, except a running job whose pod
# failed and is retried (running -> pending).
STATE_RANK = {
    State.QUEUED: 0,
    State.SUBMITTED: 1,
    State.PENDING: 2,
    State.RUNNING: 3,
    State.SUCCEEDED: 4,
    State.FAILED: 4,
    State.CANCELLED: 4,
}

# The end of a job that its team hears of (a cancelled job was stopped by someone who knows).
ENDED_EVENTS = {State.SUCCEEDED: EventKind.JOB_SUCCEEDED, State.FAILED: EventKind.JOB_FAILED}

# What ``changes_to_record`` reads of a row.
OBSERVED_FIELDS = (
    "pk",
    "team__slug",
    "state",
    "reason",
    "message",
    "node",
    "pods",
    "exit_code",
    "started_at",
    "finished_at",
    "kube_uid",
    "submitted_at",
    "admitted_at",
    "admitted_flavor",
    "preemptions",
    "preempted_at",
    "preempted_by",
    "preemption_stopped_at",
)


def _may_move(current: str, new: str) -> bool:
    if current in FINAL_STATES:
        return False
    if current == State.RUNNING and new == State.PENDING:
        return True  # a retry after a failed pod
    return STATE_RANK[new] >= STATE_RANK[current]


def _preempted_by_words(message: str, who: str) -> str:
    """``observe``'s "Preempted (why); ..." with who preempted the job after "Preempted"."""
    head = "Preempted"
    if who and message.startswith(head):
        return f"{head} by {who}{message[len(head) :]}"
    return message


def changes_to_record(
    row: dict,
    observation: Observation,
    *,
    kube_uid: str,
    now: datetime.datetime,
    preemptor: str = "",
) -> dict:
    """What to write to a job's row (as ``OBSERVED_FIELDS`` read it) for what the cluster
    shows: nothing when the Job is not the job's own (another uid) or when the state would go
    back (but for a retried pod); of a finished job, only the facts it lacks and an
    observation of the same outcome brings. ``preemptor`` names, in words,
    who preempted the job when ``observation`` says it was.

    A queued row that still holds the uid of its Job is having that Job replaced (its
    cluster's quota mode changed): what that Job shows no longer counts."""
    if kube_uid and row["kube_uid"] and kube_uid != row["kube_uid"]:
        return {}
    current = row["state"]
    if current == State.QUEUED and row["kube_uid"] and kube_uid == row["kube_uid"]:
        return {}
    if current in FINAL_STATES and observation.state == current:
        return _facts_learned_late(row, observation)
    if not _may_move(current, observation.state):
        return {}
    changes: dict[str, Any] = {}
    if observation.state != current:
        changes["state"] = observation.state
        changes["state_changed_at"] = now
    if observation.reason != row["reason"]:
        changes["reason"] = observation.reason
    changes.update(_kueue_changes(row, observation, preemptor=preemptor, now=now))
    who = changes.get("preempted_by", row["preempted_by"])
    message = observation.message
    if observation.reason == Reason.PREEMPTED:
        message = _preempted_by_words(message, who)
    if message and message != row["message"]:
        changes["message"] = message
    if observation.node and observation.node != row["node"]:
        changes["node"] = observation.node
    if observation.pods and list(observation.pods) != row["pods"]:
        changes["pods"] = list(observation.pods)
    if observation.exit_code is not None and observation.exit_code != row["exit_code"]:
        changes["exit_code"] = observation.exit_code
    if row["started_at"] is None and observation.state in (State.RUNNING, *FINAL_STATES):
        started = observation.started_at or (now if observation.state == State.RUNNING else None)
        if started is not None:
            changes["started_at"] = started
    if observation.state in FINAL_STATES and row["finished_at"] is None:
        changes["finished_at"] = observation.finished_at or now
    if kube_uid and not row["kube_uid"]:
        changes["kube_uid"] = kube_uid
    if row["submitted_at"] is None and observation.state != State.QUEUED:
        changes["submitted_at"] = now
    return changes


def _facts_learned_late(row: dict, observation: Observation) -> dict:
    """What a finished job's row lacks and an observation of the same outcome now shows: the
    watcher follows Jobs and pods on separate streams, so a Job's end can arrive before the
    events of its pod (its node, exit code, start). Nothing the row holds is changed."""
    changes: dict[str, Any] = {}
    if observation.node and not row["node"]:
        changes["node"] = observation.node
    if observation.pods and not row["pods"]:
        changes["pods"] = list(observation.pods)
    if observation.exit_code is not None and row["exit_code"] is None:
        changes["exit_code"] = observation.exit_code
    if observation.started_at is not None and row["started_at"] is None:
        changes["started_at"] = observation.started_at
    return changes


def _kueue_changes(
    row: dict, observation: Observation, *, preemptor: str, now: datetime.datetime
) -> dict:
    changes: dict[str, Any] = {}
    if observation.admitted_at and observation.admitted_at != row["admitted_at"]:
        changes["admitted_at"] = observation.admitted_at
    if observation.admitted_flavor and observation.admitted_flavor != row["admitted_flavor"]:
        changes["admitted_flavor"] = observation.admitted_flavor
    if observation.preemptions is not None and observation.preemptions > row["preemptions"]:
        changes["preemptions"] = observation.preemptions
    if observation.preempted_at and (
        row["preempted_at"] is None or observation.preempted_at > row["preempted_at"]
    ):
        changes["preempted_at"] = observation.preempted_at
        changes["preemption_reason"] = observation.preemption_reason[:200]
        changes["preempted_by"] = preemptor[:300]
        if row["preemptions"] == 0 and not changes.get("preemptions"):
            changes["preemptions"] = 1  # Kueue counts it a moment later
    preempted_at = changes.get("preempted_at", row["preempted_at"])
    stopped_at = row["preemption_stopped_at"]
    if (
        preempted_at
        and observation.reason == Reason.PREEMPTED
        and observation.pods_stopped
        and (stopped_at is None or stopped_at < preempted_at)
    ):
        changes["preemption_stopped_at"] = max(now, preempted_at)
    return changes


def preemptors(*, cluster_id: int, observations: Iterable[Observation]) -> dict[str, str]:
    """Who preempted each preempted job, in words, by the preemptor's Job uid or
    ClusterQueue: a job of the portal ("job #12 of team vision (guaranteed)"), or another
    workload of a ClusterQueue."""
    preempted = [o for o in observations if o.preempted_at]
    if not preempted:
        return {}
    uids = {o.preemptor_job_uid for o in preempted if o.preemptor_job_uid}
    found = (
        {
            uid: f"job #{pk} of team {slug} ({priority})"
            for pk, slug, priority, uid in GpuJob.objects.filter(
                cluster_id=cluster_id, kube_uid__in=list(uids)
            ).values_list("pk", "team__slug", "priority", "kube_uid")
        }
        if uids
        else {}
    )
    words = {}
    for o in preempted:
        key = o.preemptor_job_uid or o.preemptor_queue
        if o.preemptor_job_uid in found:
            words[key] = found[o.preemptor_job_uid]
        elif o.preemptor_queue:
            words[key] = f"a workload of ClusterQueue {o.preemptor_queue}"
        else:
            words[key] = "another workload"
    return words


def _preemptor_key(observation: Observation) -> str:
    return observation.preemptor_job_uid or observation.preemptor_queue


def record_observations(
    *, cluster_id: int, seen: Sequence[tuple[str, int, Observation, str]]
) -> int:
    """Record what the cluster shows for many jobs at once: ``seen`` holds (namespace, job id,
    observation, the Job's uid). Only a job's own Job counts: same cluster, the team's
    namespace and, once known, the same uid. One read for all of them, one conditional update
    per job that changed, one commit. Returns how many rows changed."""
    wanted = {job_id: (namespace, observation, uid) for namespace, job_id, observation, uid in seen}
    if not wanted:
        return 0
    rows = GpuJob.objects.filter(cluster_id=cluster_id, pk__in=list(wanted)).values(
        *OBSERVED_FIELDS
    )
    now = timezone.now()
    changed = 0
    who = preemptors(cluster_id=cluster_id, observations=[o for _, o, _ in wanted.values()])
    with transaction.atomic():
        for row in rows:
            namespace, observation, uid = wanted[row["pk"]]
            if row["team__slug"] != namespace:
                continue
            preemptor = who.get(_preemptor_key(observation), "")
            changed += record_observation(
                row, observation, kube_uid=uid, now=now, preemptor=preemptor
            )
    return changed


def record_observation(
    row: dict,
    observation: Observation,
    *,
    kube_uid: str,
    now: datetime.datetime,
    preemptor: str = "",
) -> int:
    """Record one job's observation, conditional on the state ``row`` was read in; returns 1
    if the row changed.

    Another writer may move the state between the read and the write: a stop (which wins, as a
    finished job never moves again) or the submit task marking the job submitted just as its
    pod's first events arrive. The row is then read again and judged afresh, so that the
    cluster's news is not dropped: no later event may come to repeat it."""
    for _ in range(3):
        changes = changes_to_record(
            row, observation, kube_uid=kube_uid, now=now, preemptor=preemptor
        )
        if not changes:
            return 0
        if GpuJob.objects.filter(pk=row["pk"], state=row["state"]).update(**changes):
            if changes.get("state") in ENDED_EVENTS:
                emit_job_ended(row["pk"])
            if "preempted_at" in changes:
                emit_job_preempted(row["pk"])
            return 1
        row = GpuJob.objects.filter(pk=row["pk"]).values(*OBSERVED_FIELDS).first()
        if row is None:
            return 0
    return 0


def record_finished(
    job_id: int, *, state: str, reason: str, message: str, only_from: Iterable[str]
) -> int:
    """End the job (``state``: failed or cancelled) if it is still in one of ``only_from``;
    returns how many rows changed (0 or 1)."""
    now = timezone.now()
    changed = GpuJob.objects.filter(pk=job_id, state__in=list(only_from)).update(
        state=state, reason=reason, message=message, finished_at=now, state_changed_at=now
    )
    if changed and state in ENDED_EVENTS:
        emit_job_ended(job_id)
    return changed


def emit_job_ended(job_id: int) -> None:
    """Tell the team's listeners (webhooks) that the job succeeded or failed, as its row now
    says; called by whoever just moved it there."""
    job = GpuJob.objects.select_related("team", "cluster").filter(pk=job_id).first()
    if job is None or job.state not in ENDED_EVENTS:
        return
    member_holds.release_after_commit_of(job)
    ended = "succeeded" if job.state == State.SUCCEEDED else "failed"
    title = f"Job #{job.pk} {job.name} of {job.team.slug} {ended} on {job.cluster.name}"
    if job.state == State.FAILED and job.reason:
        title += f" ({job.reason})"
    emit(
        team_id=job.team_id,
        kind=ENDED_EVENTS[job.state],
        title=title,
        data={
            "job_id": job.pk,
            "name": job.name,
            "cluster": job.cluster.name,
            "state": job.state,
            "reason": job.reason,
            "message": job.message[:1000],
            "exit_code": job.exit_code,
            "gpus": job.gpus,
            "started_at": job.started_at.isoformat() if job.started_at else None,
            "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        },
        link=reverse("gpujob-detail", args=[job.pk]),
    )


def emit_job_preempted(job_id: int) -> None:
    """Tell the team's listeners (webhooks) and the job's owner (a notification) that Kueue
    preempted the job, as its row now says: its pods are being stopped (SIGTERM first, SIGKILL
    when the cluster's grace period is up: time for a training loop to checkpoint, given in
    the event) and it waits in the queue again. Sent once per preemption, when the watcher
    first records it."""
    job = GpuJob.objects.select_related("team", "cluster", "submitted_by").filter(pk=job_id).first()
    if job is None or job.preempted_at is None:
        return
    by = f" by {job.preempted_by}" if job.preempted_by else ""
    grace = job.cluster.preemption_grace_seconds
    emit(
        team_id=job.team_id,
        kind=EventKind.JOB_PREEMPTED,
        title=f"Job #{job.pk} {job.name} of {job.team.slug} preempted on {job.cluster.name}{by}",
        data={
            "job_id": job.pk,
            "name": job.name,
            "cluster": job.cluster.name,
            "submitted_by": job.submitted_by.get_username(),
            "priority": job.priority,
            "preemptions": job.preemptions,
            "preempted_at": job.preempted_at.isoformat(),
            "preempted_by": job.preempted_by,
            "reason": job.preemption_reason,
            "gpus": job.gpus,
            "grace_seconds": grace,
            "stopped_by": (job.preempted_at + datetime.timedelta(seconds=grace)).isoformat(),
        },
        link=reverse("gpujob-detail", args=[job.pk]),
    )
    Notification.objects.create(
        user=job.submitted_by,
        team=job.team,
        kind=Notification.Kind.JOB_PREEMPTED,
        subject=f"Job {job.name} was preempted on {job.cluster.name}"[:200],
        body=(
            f"Kueue took back the GPUs job #{job.pk} borrowed{by}: its containers got SIGTERM "
            f"and have {grace} seconds to save their work before SIGKILL, and it waits in the "
            "queue again, to run once GPUs are free."
        ),
        link=reverse("gpujob-detail", args=[job.pk]),
    )


def record_job_gone(*, job_id: int, cluster_id: int, namespace: str, kube_uid: str = "") -> bool:
    """The job's Job is gone from the cluster while the portal still thought it active: stopped
    by the idle-GPU policy (cancelled), or deleted by hand or with its namespace (failed).
    Returns whether the row changed."""
    row = (
        GpuJob.objects.filter(pk=job_id, cluster_id=cluster_id, team__slug=namespace)
        .values("state", "kube_uid", "pods")
        .first()
    )
    if row is None or row["state"] in FINAL_STATES or row["state"] == State.QUEUED:
        return False
    if kube_uid and row["kube_uid"] and kube_uid != row["kube_uid"]:
        return False
    idle = selectors.idle_stop_message(cluster_id=cluster_id, namespace=namespace, pods=row["pods"])
    if idle is not None:
        finished = record_finished(
            job_id,
            state=State.CANCELLED,
            reason=Reason.IDLE_STOPPED,
            message=idle,
            only_from=[row["state"]],
        )
        return bool(finished)
    return bool(
        record_finished(
            job_id,
            state=State.FAILED,
            reason=Reason.JOB_GONE,
            message="The Job was deleted from the cluster outside the portal.",
            only_from=[row["state"]],
        )
    )
