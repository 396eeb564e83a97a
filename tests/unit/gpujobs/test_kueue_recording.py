"""What Kueue's facts change on a job's row: admission time and flavor, the count of
preemptions, the last preemption and who made it (kept once Kueue forgets it), and a queued row
whose Job is being made again ignores that Job. No database."""

import datetime

from gpujobs.observe import Observation
from gpujobs.recording import changes_to_record
from workloads.pod_states import Reason

NOW = datetime.datetime(2026, 12, 1, 1, 0, tzinfo=datetime.UTC)
EARLIER = NOW - datetime.timedelta(minutes=10)


def row(**kwargs):
    values = {
        "state": "running",
        "reason": "",
        "message": "Running on node gpu-node-1.",
        "node": "gpu-node-1",
        "pods": ["p"],
        "exit_code": None,
        "started_at": EARLIER,
        "finished_at": None,
        "kube_uid": "uid-1",
        "submitted_at": EARLIER,
        "admitted_at": EARLIER,
        "admitted_flavor": "a100",
        "preemptions": 0,
        "preempted_at": None,
        "preempted_by": "",
        "preemption_stopped_at": None,
    }
    values.update(kwargs)
    return values


def preempted(**kwargs) -> Observation:
    values = {
        "state": "pending",
        "reason": Reason.PREEMPTED,
        "message": "Preempted: why; requeued in the team's opportunistic queue, waiting.",
        "preemptions": 1,
        "preempted_at": NOW,
        "preemption_reason": "why",
        "preemptor_job_uid": "uid-9",
    }
    values.update(kwargs)
    return Observation(**values)


def test_a_preemption_is_recorded_with_who_made_it_in_the_jobs_message():
    changes = changes_to_record(
        row(), preempted(), kube_uid="uid-1", now=NOW, preemptor="job #9 of team cv (guaranteed)"
    )

    assert changes["state"] == "pending"
    assert changes["preemptions"] == 1
    assert changes["preempted_at"] == NOW
    assert changes["preempted_by"] == "job #9 of team cv (guaranteed)"
    assert changes["preemption_reason"] == "why"
    assert changes["message"] == (
        "Preempted by job #9 of team cv (guaranteed): why; requeued in the team's opportunistic "
        "queue, waiting."
    )


def test_the_same_preemption_seen_again_changes_nothing():
    seen = row(
        state="pending",
        reason=Reason.PREEMPTED,
        preemptions=1,
        preempted_at=NOW,
        preempted_by="job #9 of team cv (guaranteed)",
        message="Preempted by job #9 of team cv (guaranteed): why; requeued in the team's "
        "opportunistic queue, waiting.",
    )

    assert changes_to_record(seen, preempted(), kube_uid="uid-1", now=NOW, preemptor="x") == {}


def test_a_preempted_jobs_stop_is_recorded_once_its_pods_are_gone():
    warned = row(
        state="pending", reason=Reason.PREEMPTED, preemptions=1, preempted_at=EARLIER,
        preempted_by="job #9",
    )  # fmt: skip
    terminating = preempted(preempted_at=EARLIER, pods_stopped=False)
    gone = preempted(preempted_at=EARLIER, pods_stopped=True)

    assert "preemption_stopped_at" not in changes_to_record(
        warned, terminating, kube_uid="uid-1", now=NOW
    )
    assert changes_to_record(warned, gone, kube_uid="uid-1", now=NOW)["preemption_stopped_at"] == (
        NOW
    )
    stopped = {**warned, "preemption_stopped_at": EARLIER + datetime.timedelta(seconds=10)}
    assert "preemption_stopped_at" not in changes_to_record(
        stopped, gone, kube_uid="uid-1", now=NOW
    )
    # A later preemption is stopped anew.
    again = preempted(preempted_at=NOW, preemptions=2, pods_stopped=True)
    later = NOW + datetime.timedelta(seconds=30)
    assert (
        changes_to_record(stopped, again, kube_uid="uid-1", now=later)["preemption_stopped_at"]
        == later
    )


def test_a_later_admission_keeps_the_last_preemption_and_counts_more():
    seen = row(
        state="pending",
        reason=Reason.PREEMPTED,
        preemptions=1,
        preempted_at=EARLIER,
        preempted_by="job #9",
    )
    again = Observation(state="running", node="gpu-node-2", admitted_at=NOW, preemptions=2)

    changes = changes_to_record(seen, again, kube_uid="uid-1", now=NOW)

    assert changes["admitted_at"] == NOW
    assert changes["preemptions"] == 2
    assert "preempted_by" not in changes
    assert "preempted_at" not in changes


def test_a_queued_row_whose_job_is_being_made_again_ignores_the_old_job():
    moving = row(state="queued", reason=Reason.QUOTA_MODE_CHANGED, kube_uid="uid-1")

    assert changes_to_record(moving, preempted(), kube_uid="uid-1", now=NOW) == {}
    assert changes_to_record(moving, preempted(), kube_uid="uid-2", now=NOW) == {}
