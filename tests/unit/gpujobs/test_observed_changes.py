"""What an observation changes on a job's row: states move forward only, finished jobs stay as
they are (but learn the facts they lack), facts learned once are kept, and another Job of the
same name is ignored."""

import datetime

import pytest

from gpujobs.observe import Observation
from gpujobs.recording import changes_to_record

NOW = datetime.datetime(2026, 3, 10, 10, 0, tzinfo=datetime.UTC)
STARTED = NOW - datetime.timedelta(minutes=5)


def row(**kwargs):
    values = {
        "state": "submitted",
        "reason": "",
        "message": "",
        "node": "",
        "pods": [],
        "exit_code": None,
        "started_at": None,
        "finished_at": None,
        "kube_uid": "uid-1",
        "submitted_at": NOW,
        "admitted_at": None,
        "admitted_flavor": "",
        "preemptions": 0,
        "preempted_at": None,
        "preempted_by": "",
        "preemption_stopped_at": None,
    }
    values.update(kwargs)
    return values


def changes(current, observation, uid="uid-1"):
    return changes_to_record(current, observation, kube_uid=uid, now=NOW)


def test_running_records_node_start_and_state_change_time():
    seen = Observation(state="running", node="gpu-node-1", started_at=STARTED, pods=("p",))

    assert changes(row(), seen) == {
        "state": "running",
        "state_changed_at": NOW,
        "node": "gpu-node-1",
        "pods": ["p"],
        "started_at": STARTED,
    }


def test_running_without_a_start_time_starts_now():
    assert changes(row(), Observation(state="running"))["started_at"] == NOW


@pytest.mark.parametrize("final", ["succeeded", "failed", "cancelled"])
def test_finished_jobs_are_left_alone(final):
    assert changes(row(state=final), Observation(state="running")) == {}


@pytest.mark.parametrize(
    ("current", "seen"),
    [("pending", "submitted"), ("running", "submitted"), ("submitted", "queued")],
)
def test_states_never_go_back(current, seen):
    assert changes(row(state=current), Observation(state=seen)) == {}


def test_a_finished_job_learns_the_facts_its_pods_events_bring_late():
    """The Job's end came before its pod's events (separate watch streams)."""
    current = row(state="succeeded", finished_at=NOW, message="Finished successfully.")
    seen = Observation(
        state="succeeded", node="gpu-node-1", pods=("p",), exit_code=0, started_at=STARTED
    )

    assert changes(current, seen) == {
        "node": "gpu-node-1",
        "pods": ["p"],
        "exit_code": 0,
        "started_at": STARTED,
    }


def test_a_finished_job_keeps_what_it_knows_and_ignores_another_outcome():
    current = row(state="failed", node="gpu-node-1", pods=["p"], exit_code=3, started_at=STARTED)

    assert changes(current, Observation(state="failed", node="gpu-node-2", exit_code=1)) == {}
    assert changes(row(state="cancelled"), Observation(state="succeeded", node="n")) == {}


def test_a_retried_pod_takes_a_running_job_back_to_pending():
    assert changes(row(state="running"), Observation(state="pending"))["state"] == "pending"


def test_a_job_with_another_uid_is_not_this_one():
    assert changes(row(), Observation(state="running"), uid="uid-2") == {}


def test_known_facts_are_kept_when_an_observation_lacks_them():
    current = row(state="running", node="gpu-node-1", exit_code=None, started_at=STARTED)

    result = changes(current, Observation(state="succeeded", exit_code=0))

    assert "node" not in result
    assert "started_at" not in result
    assert result["exit_code"] == 0
    assert result["finished_at"] == NOW


def test_nothing_new_changes_nothing():
    current = row(state="running", node="n", pods=["p"], started_at=STARTED, message="m")

    assert changes(current, Observation(state="running", node="n", pods=("p",), message="m")) == {}


def test_uid_and_submission_time_are_filled_in_when_missing():
    result = changes(
        row(state="queued", kube_uid="", submitted_at=None), Observation(state="submitted")
    )

    assert result["kube_uid"] == "uid-1"
    assert result["submitted_at"] == NOW
