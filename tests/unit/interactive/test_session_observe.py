"""A session's run as its Job and pod show it, and the culling rule."""

import datetime

import pytest

from interactive.culling import ServerActivity, activity_of, judge
from interactive.models import InteractiveSession, SessionPolicy
from interactive.tracker import observe

State = InteractiveSession.State
T0 = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.UTC)


def job(*, suspend=False, condition=None, reason=""):
    status = {}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True", "reason": reason}]
    return {"metadata": {"name": "session-7-1"}, "spec": {"suspend": suspend}, "status": status}


def pod(*, phase="Running", ready=True, ip="10.245.0.9", node="real-node-0", waiting=None):
    status = {"phase": phase, "podIP": ip}
    status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    if waiting:
        status["containerStatuses"] = [{"name": "notebook", "state": {"waiting": waiting}}]
    return {"metadata": {"name": "session-7-1-abcde"}, "spec": {"nodeName": node}, "status": status}


def test_a_ready_pod_is_a_running_session_with_its_servers_address():
    seen = observe(job(), [pod()], port=8888)
    assert (seen.state, seen.server_address, seen.node) == (
        State.RUNNING,
        "10.245.0.9:8888",
        "real-node-0",
    )


def test_a_suspended_job_waits_in_the_queue_and_a_pod_not_ready_is_starting():
    assert observe(job(suspend=True), [], port=8888).reason == "InQueue"
    starting = observe(job(), [pod(ready=False)], port=8888)
    assert starting.state == State.STARTING
    assert starting.server_address == ""
    pulling = observe(
        job(), [pod(phase="Pending", ready=False, waiting={"reason": "ErrImageNeverPull"})], port=1
    )
    assert pulling.reason == "ImagePullFailed"


def test_the_lifetime_stops_a_run_and_a_crash_fails_it():
    ended = observe(job(condition="Failed", reason="DeadlineExceeded"), [], port=8888)
    assert (ended.state, ended.stop_reason) == (State.STOPPED, "lifetime")
    crashed = observe(job(condition="Failed", reason="BackoffLimitExceeded"), [], port=8888)
    assert crashed.state == State.FAILED
    assert observe(None, [], port=8888) is None


def policy(idle=60, warn=15):
    return SessionPolicy(max_lifetime_hours=8, idle_minutes=idle, warn_minutes=warn)


def test_idle_server_and_gpus_are_warned_then_stopped_on_the_teams_clock():
    verdict = judge(
        started_at=T0,
        activity=ServerActivity(last_activity=T0 + datetime.timedelta(minutes=10), busy=False),
        gpus_idle=True,
        warned_at=None,
        policy=policy(),
    )
    assert verdict.idle_since == T0 + datetime.timedelta(minutes=10)
    assert verdict.warn_at == T0 + datetime.timedelta(minutes=55)
    assert verdict.stop_at == T0 + datetime.timedelta(minutes=70)


def test_a_late_warning_still_gives_the_owner_the_whole_warning_time():
    verdict = judge(
        started_at=T0,
        activity=ServerActivity(last_activity=T0, busy=False),
        gpus_idle=True,
        warned_at=T0 + datetime.timedelta(minutes=58),
        policy=policy(),
    )
    assert verdict.stop_at == T0 + datetime.timedelta(minutes=73)


@pytest.mark.parametrize(
    ("busy", "gpus_idle"), [(True, True), (False, False)], ids=["busy kernel", "busy GPUs"]
)
def test_a_busy_kernel_or_busy_gpus_is_never_idle(busy, gpus_idle):
    verdict = judge(
        started_at=T0,
        activity=ServerActivity(last_activity=T0, busy=busy),
        gpus_idle=gpus_idle,
        warned_at=None,
        policy=policy(),
    )
    assert verdict.idle_since is None
    assert verdict.stop_at is None


def test_the_servers_activity_is_the_latest_of_its_own_and_its_kernels():
    activity = activity_of(
        {"last_activity": "2026-12-06T12:00:00Z", "kernels": 2},
        [
            {"last_activity": "2026-12-06T12:30:00Z", "execution_state": "idle"},
            {"last_activity": "2026-12-06T12:10:00Z", "execution_state": "busy"},
        ],
    )
    assert activity.last_activity == T0 + datetime.timedelta(minutes=30)
    assert activity.busy
    assert activity.kernels == 2
