"""A queued Job's state from its Kueue Workload: waiting in the queue, admitted and starting,
preempted (by whom, why) and requeued, and running again; and which Jobs wait under the quota
mode their cluster has left. The Workloads' conditions are as Kueue v0.17 writes them on the
devcluster. No database."""

import datetime

from gpujobs.observe import State, kueue_facts, observe, waits_in_the_other_mode
from workloads.pod_states import Reason

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREEMPTED_MESSAGE = (
    "Preempted to accommodate a workload (UID: 617e280b, JobUID: d39434f1-fd8c) due to "
    "reclamation within the cohort; preemptor path: /gpu-portal/gpu-portal-vision; preemptee "
    "path: /gpu-portal/gpu-portal-nlp-opportunistic"
)
PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: flavor gpu-portal-any-gpu doesn't match node "
    "affinity, flavor gpu-portal-nvidia-h100-80gb-hbm3 doesn't match node affinity, "
    "insufficient unused quota for nvidia.com/gpu in flavor gpu-portal-nvidia-a100-sxm4-80gb, "
    "2 more needed"
)


def job(*, queue="guaranteed", suspend=True, **status):
    labels = {"gpuportal.io/job-id": "7"}
    if queue:
        labels[QUEUE_LABEL] = queue
    return {
        "kind": "Job",
        "metadata": {"name": "gpujob-7", "namespace": "vision", "uid": "uid-1", "labels": labels},
        "spec": {
            "suspend": suspend,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
                    ]
                }
            },
        },
        "status": status,
    }


def condition(kind, status, reason, message="", at="2026-12-01T00:19:27Z"):
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


def workload(*conditions, admission=None, evictions=0):
    status = {"conditions": list(conditions)}
    if admission:
        status["admission"] = admission
    if evictions:
        status["schedulingStats"] = {
            "evictions": [{"count": evictions, "reason": "Preempted", "underlyingCause": ""}]
        }
    return {
        "kind": "Workload",
        "metadata": {"name": "job-gpujob-7-x"},
        "spec": {"active": True},
        "status": status,
    }


ADMISSION = {
    "clusterQueue": "gpu-portal-vision",
    "podSetAssignments": [
        {
            "name": "main",
            "flavors": {"nvidia.com/gpu": "gpu-portal-nvidia-a100-sxm4-80gb", "cpu": "cpu-mem"},
        }
    ],
}


def running_pod():
    return {
        "kind": "Pod",
        "metadata": {"name": "gpujob-7-a", "creationTimestamp": "2026-12-01T00:20:00Z"},
        "spec": {"nodeName": "gpu-node-1"},
        "status": {"phase": "Running"},
    }


def test_a_queued_job_before_kueue_made_its_workload_waits_for_kueue():
    seen = observe(job(), [], [], None)

    assert (seen.state, seen.reason) == (State.PENDING, Reason.IN_QUEUE)
    assert seen.message == "Waiting for Kueue to take it into the team's guaranteed queue."


def test_a_pending_workload_waits_in_the_queue_with_kueues_reason():
    pending = workload(condition("QuotaReserved", "False", "Pending", PENDING_MESSAGE))

    seen = observe(job(), [], [], pending)

    assert (seen.state, seen.reason) == (State.PENDING, Reason.IN_QUEUE)
    assert seen.message == (
        "Waiting in the team's guaranteed queue: insufficient unused quota for nvidia.com/gpu "
        "in flavor gpu-portal-nvidia-a100-sxm4-80gb, 2 more needed"
    )
    assert seen.admitted_at is None
    assert seen.preemptions == 0


def test_an_admitted_workload_whose_job_is_not_yet_resumed_is_starting():
    admitted = workload(
        condition("QuotaReserved", "True", "QuotaReserved"),
        condition("Admitted", "True", "Admitted", at="2026-12-01T00:19:54Z"),
        admission=ADMISSION,
    )

    seen = observe(job(), [], [], admitted)

    assert (seen.state, seen.reason) == (State.PENDING, Reason.ADMITTED)
    assert seen.admitted_at == datetime.datetime(2026, 12, 1, 0, 19, 54, tzinfo=datetime.UTC)
    assert seen.admitted_flavor == "gpu-portal-nvidia-a100-sxm4-80gb"


def test_a_preempted_workload_says_why_and_names_its_preemptor():
    preempted = workload(
        condition("QuotaReserved", "False", "Pending", PENDING_MESSAGE),
        condition("Evicted", "True", "Preempted", PREEMPTED_MESSAGE),
        condition("Admitted", "False", "NoReservation"),
        condition("Preempted", "True", "InCohortReclamation", PREEMPTED_MESSAGE),
        condition("Requeued", "True", "Preempted", PREEMPTED_MESSAGE),
        evictions=1,
    )

    seen = observe(job(queue="opportunistic"), [running_pod()], [], preempted)

    assert (seen.state, seen.reason) == (State.PENDING, Reason.PREEMPTED)
    assert seen.message.startswith(
        "Preempted: the team whose idle GPUs it borrowed took them back; requeued in the "
        "team's opportunistic queue, waiting: insufficient unused quota"
    )
    assert seen.preemptions == 1
    assert seen.preempted_at == datetime.datetime(2026, 12, 1, 0, 19, 27, tzinfo=datetime.UTC)
    assert seen.preemptor_job_uid == "d39434f1-fd8c"
    assert seen.preemptor_queue == "gpu-portal-vision"
    # Its pod is still terminating (Running, with its grace period): not stopped yet.
    assert seen.pods_stopped is False
    assert observe(job(queue="opportunistic"), [], [], preempted).pods_stopped is True


def test_a_job_admitted_again_runs_and_keeps_its_count_of_preemptions():
    again = workload(
        condition("QuotaReserved", "True", "QuotaReserved"),
        condition("Evicted", "False", "QuotaReserved"),
        condition("Admitted", "True", "Admitted"),
        condition("Preempted", "False", "QuotaReserved"),
        admission=ADMISSION,
        evictions=1,
    )

    seen = observe(job(suspend=False), [running_pod()], [], again)

    assert seen.state == State.RUNNING
    assert seen.preemptions == 1
    assert seen.preempted_at is None  # Kueue forgot it: the job's row keeps it


def test_a_job_without_the_queue_label_is_observed_as_before():
    assert observe(job(queue="", suspend=False), [running_pod()], [], None).state == State.RUNNING
    assert kueue_facts(None, gpu_resource="nvidia.com/gpu") == {}


def test_a_finished_queued_job_is_finished_whatever_its_workload_says():
    done = job(
        suspend=True,
        conditions=[{"type": "Complete", "status": "True"}],
        completionTime="2026-12-01T01:00:00Z",
    )

    assert observe(done, [], [], None).state == State.SUCCEEDED


def test_a_suspended_queued_job_waits_in_the_other_mode_on_a_quota_only_cluster():
    assert waits_in_the_other_mode(job(), [], kueue=False)
    assert not waits_in_the_other_mode(job(), [], kueue=True)
    assert not waits_in_the_other_mode(job(suspend=False), [running_pod()], kueue=False)


def test_an_unqueued_job_that_has_not_started_waits_in_the_other_mode_on_a_kueue_cluster():
    unscheduled = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}

    assert waits_in_the_other_mode(job(queue="", suspend=False), [], kueue=True)
    assert waits_in_the_other_mode(job(queue="", suspend=False), [unscheduled], kueue=True)
    assert not waits_in_the_other_mode(job(queue="", suspend=False), [running_pod()], kueue=True)
    assert not waits_in_the_other_mode(job(queue="", suspend=False), [], kueue=False)
