"""From a Job, its pods and its events (as the API returns them) to the portal's state, node,
times, exit code and the reason in words."""

import datetime

import pytest

from gpujobs.observe import State, observe
from workloads.pod_states import QUOTA_USED_UP, Reason, pod_waiting_reason

UTC = datetime.UTC


def job(*, conditions=(), deleting=False, backoff_limit=0, deadline=3600, **status):
    metadata = {"name": "gpujob-7", "namespace": "vision", "uid": "job-uid"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-03-10T10:05:00Z"
    return {
        "kind": "Job",
        "metadata": metadata,
        "spec": {"backoffLimit": backoff_limit, "activeDeadlineSeconds": deadline},
        "status": {"conditions": list(conditions), **status},
    }


def condition(type_, reason="", message="", at="2026-03-10T10:04:00Z"):
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


def pod(
    name="gpujob-7-abcde",
    *,
    phase="Pending",
    node=None,
    created="2026-03-10T10:00:00Z",
    containers=(),
    conditions=(),
    start=None,
):
    spec = {"nodeName": node} if node else {}
    status = {"phase": phase, "conditions": list(conditions), "containerStatuses": list(containers)}
    if start:
        status["startTime"] = start
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "vision", "creationTimestamp": created},
        "spec": spec,
        "status": status,
    }


def running(name="main", started="2026-03-10T10:01:00Z"):
    return {"name": name, "state": {"running": {"startedAt": started}}}


def terminated(
    name="main", code=0, started="2026-03-10T10:01:00Z", finished="2026-03-10T10:03:00Z"
):
    return {
        "name": name,
        "state": {"terminated": {"exitCode": code, "startedAt": started, "finishedAt": finished}},
    }


def waiting(reason, message="", name="main"):
    return {"name": name, "state": {"waiting": {"reason": reason, "message": message}}}


def event(reason, message, *, name="gpujob-7", at="2026-03-10T10:00:05Z"):
    return {
        "kind": "Event",
        "metadata": {"name": f"{name}.1", "namespace": "vision"},
        "involvedObject": {"kind": "Job", "name": name, "namespace": "vision"},
        "reason": reason,
        "message": message,
        "lastTimestamp": at,
    }


def at(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_nothing_to_say_without_a_job():
    assert observe(None, [], []) is None


def test_nothing_to_say_while_the_job_is_being_deleted():
    assert observe(job(deleting=True), [pod(phase="Running", node="gpu-node-0")], []) is None


def test_job_without_pods_is_submitted():
    seen = observe(job(), [], [])

    assert seen.state == State.SUBMITTED


def test_running_pod_gives_node_and_start_time():
    seen = observe(job(), [pod(phase="Running", node="gpu-node-2", containers=[running()])], [])

    assert seen.state == State.RUNNING
    assert seen.node == "gpu-node-2"
    assert seen.started_at == at("2026-03-10T10:01:00Z")
    assert seen.pods == ("gpujob-7-abcde",)


def test_complete_job_succeeded_with_exit_code_and_end_time():
    seen = observe(
        job(conditions=[condition("Complete")], completionTime="2026-03-10T10:03:01Z"),
        [pod(phase="Succeeded", node="gpu-node-1", containers=[terminated(code=0)])],
        [],
    )

    assert seen.state == State.SUCCEEDED
    assert seen.exit_code == 0
    assert seen.node == "gpu-node-1"
    assert seen.started_at == at("2026-03-10T10:01:00Z")
    assert seen.finished_at == at("2026-03-10T10:03:01Z")


def test_succeeded_pod_is_success_before_the_job_controller_says_so():
    seen = observe(job(), [pod(phase="Succeeded", containers=[terminated(code=0)])], [])

    assert seen.state == State.SUCCEEDED
    assert seen.finished_at == at("2026-03-10T10:03:00Z")


def test_failed_job_shows_the_containers_exit_code():
    seen = observe(
        job(conditions=[condition("Failed", "BackoffLimitExceeded", "Job has reached the...")]),
        [pod(phase="Failed", node="gpu-node-0", containers=[terminated(code=3)])],
        [],
    )

    assert seen.state == State.FAILED
    assert seen.exit_code == 3
    assert seen.reason == Reason.BACKOFF_LIMIT
    assert seen.message == "The container exited with code 3."


def test_failure_target_counts_as_failed():
    seen = observe(
        job(conditions=[condition("FailureTarget", "BackoffLimitExceeded")]),
        [pod(phase="Failed", containers=[terminated(code=1)])],
        [],
    )

    assert seen.state == State.FAILED


def test_failed_pod_within_retries_waits_for_the_next_one():
    seen = observe(job(backoff_limit=1), [pod(phase="Failed", containers=[terminated(code=1)])], [])

    assert seen.state == State.PENDING
    assert seen.exit_code == 1


def test_failed_pods_beyond_retries_fail_the_job():
    pods = [
        pod("gpujob-7-a", phase="Failed", containers=[terminated(code=1)]),
        pod("gpujob-7-b", phase="Failed", created="2026-03-10T10:05:00Z",
            containers=[terminated(code=2)]),
    ]  # fmt: skip

    seen = observe(job(backoff_limit=1), pods, [])

    assert seen.state == State.FAILED
    assert seen.exit_code == 2  # the newest pod's


def test_failed_preprocessing_is_the_exit_code_when_the_gpu_container_never_ran():
    failed_pod = pod(phase="Failed", containers=[waiting("PodInitializing")])
    failed_pod["status"]["initContainerStatuses"] = [terminated(name="preprocess", code=4)]

    seen = observe(job(), [failed_pod], [])

    assert seen.state == State.FAILED
    assert seen.exit_code == 4


def test_deadline_exceeded_says_so_in_words():
    seen = observe(
        job(
            conditions=[condition("Failed", "DeadlineExceeded", "Job was active longer...")],
            deadline=120,
        ),
        [],
        [],
    )

    assert seen.state == State.FAILED
    assert seen.reason == Reason.DEADLINE_EXCEEDED
    assert seen.message == "Deadline exceeded: stopped after its maximum run time of 2 min."
    assert seen.finished_at == at("2026-03-10T10:04:00Z")


SCHEDULER_NO_GPUS = (
    "0/6 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
    "4 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: "
    "2 Preemption is not helpful for scheduling, 4 No preemption victims found."
)


def test_unschedulable_for_gpus_says_no_gpu_node_has_enough_free_gpus():
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": SCHEDULER_NO_GPUS,
    }

    seen = observe(job(), [pod(conditions=[unschedulable])], [])

    assert seen.state == State.PENDING
    assert seen.reason == Reason.NO_FREE_GPUS
    assert seen.message.startswith("No GPU node has enough free GPUs.")
    assert "4 Insufficient nvidia.com/gpu" in seen.message


def test_unschedulable_for_another_reason_shows_the_scheduler_message():
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/6 nodes are available: 6 node(s) didn't match Pod's node affinity.",
    }

    seen = observe(job(), [pod(conditions=[unschedulable])], [])

    assert seen.reason == Reason.UNSCHEDULABLE
    assert "didn't match Pod's node affinity" in seen.message


def test_a_pod_at_kueues_gate_waits_in_the_teams_queue():
    gated = pod(
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    )
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]

    assert pod_waiting_reason(gated) == (
        Reason.IN_QUEUE,
        "Waiting in the team's queue for Kueue to admit it.",
    )


def test_a_pod_at_someone_elses_gate_is_not_said_to_be_in_the_queue():
    gated = pod(
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    )
    gated["spec"]["schedulingGates"] = [{"name": "example.com/other"}]

    assert pod_waiting_reason(gated)[0] == Reason.UNSCHEDULABLE


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff", "InvalidImageName"])
def test_image_that_cannot_be_pulled(reason):
    seen = observe(
        job(),
        [pod(node="gpu-node-0", containers=[waiting(reason, 'pull access denied for "x"')])],
        [],
    )

    assert seen.state == State.PENDING
    assert seen.reason == Reason.IMAGE_PULL
    assert seen.message.startswith("The image of container main cannot be pulled")
    assert "pull access denied" in seen.message
    assert seen.node == "gpu-node-0"


QUOTA_REFUSAL = (
    'Error creating: pods "gpujob-7-x2k9p" is forbidden: exceeded quota: gpu-portal-quota, '
    "requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, "
    "limited: requests.nvidia.com/gpu=1"
)


def test_apiserver_quota_refusal_is_shown_as_the_quota_used_up():
    seen = observe(job(), [], [event("FailedCreate", QUOTA_REFUSAL)])

    assert seen.state == State.PENDING
    assert seen.reason == Reason.EXCEEDED_QUOTA
    assert seen.message.startswith(QUOTA_USED_UP)
    assert "limited: requests.nvidia.com/gpu=1" in seen.message


def test_events_of_other_jobs_do_not_count():
    seen = observe(job(), [], [event("FailedCreate", QUOTA_REFUSAL, name="gpujob-8")])

    assert seen.state == State.SUBMITTED


def test_the_latest_refusal_is_shown():
    events = [
        event("FailedCreate", "Error creating: something else", at="2026-03-10T10:00:01Z"),
        event("FailedCreate", QUOTA_REFUSAL, at="2026-03-10T10:00:09Z"),
    ]

    assert observe(job(), [], events).reason == Reason.EXCEEDED_QUOTA


def test_a_pod_created_after_a_refusal_wins():
    seen = observe(
        job(),
        [pod(phase="Running", node="gpu-node-3", containers=[running()])],
        [event("FailedCreate", QUOTA_REFUSAL)],
    )

    assert seen.state == State.RUNNING


def test_scheduled_pod_that_is_not_running_yet_is_starting():
    seen = observe(job(), [pod(node="gpu-node-1", containers=[waiting("ContainerCreating")])], [])

    assert seen.state == State.PENDING
    assert seen.reason == Reason.STARTING
    assert seen.node == "gpu-node-1"


def test_newest_pod_decides_after_a_retry():
    pods = [
        pod("gpujob-7-b", phase="Running", node="gpu-node-2", created="2026-03-10T10:06:00Z",
            containers=[running(started="2026-03-10T10:06:30Z")]),
        pod("gpujob-7-a", phase="Failed", node="gpu-node-1", containers=[terminated(code=1)]),
    ]  # fmt: skip

    seen = observe(job(backoff_limit=1), pods, [])

    assert seen.state == State.RUNNING
    assert seen.node == "gpu-node-2"
    assert seen.pods == ("gpujob-7-a", "gpujob-7-b")
