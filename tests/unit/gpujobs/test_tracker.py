"""The watcher's view of a cluster: objects keyed by (namespace, job id), kept from lists and
watch events, and turned into observations. No database."""

import json

from gpujobs.observe import State, observe
from gpujobs.tracker import ClusterState, kept, key_of

LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpuportal.io/job-id": "7"}


def job(uid="uid-1", namespace="vision", job_id="7", **status):
    return {
        "kind": "Job",
        "metadata": {
            "name": f"gpujob-{job_id}",
            "namespace": namespace,
            "uid": uid,
            "labels": {**LABELS, "gpuportal.io/job-id": job_id},
        },
        "spec": {"backoffLimit": 0},
        "status": status,
    }


def pod(name="gpujob-7-a", phase="Running", owner="uid-1", namespace="vision"):
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": LABELS,
            "creationTimestamp": "2026-03-10T10:00:00Z",
            "ownerReferences": [{"kind": "Job", "controller": True, "uid": owner}],
        },
        "spec": {"nodeName": "gpu-node-1"},
        "status": {"phase": phase},
    }


def quota_event(job_name="gpujob-7", namespace="vision", uid="uid-1", **involved):
    """The job controller's Event when the quota refuses the Job's pod."""
    return {
        "kind": "Event",
        "metadata": {"name": f"{job_name}.17a", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job_name,
            "namespace": namespace,
            "uid": uid,
            **involved,
        },
        "reason": "FailedCreate",
        "message": "Error creating: pods is forbidden: exceeded quota: q",
    }


def test_keys_come_from_the_job_id_label_or_the_jobs_name():
    assert key_of("Job", job()) == ("vision", 7)
    assert key_of("Pod", pod()) == ("vision", 7)
    assert key_of("Event", quota_event()) == ("vision", 7)


def test_objects_that_are_not_the_portals_have_no_key():
    foreign = pod()
    foreign["metadata"]["labels"] = {"app": "x"}

    assert key_of("Pod", foreign) is None
    assert key_of("Event", quota_event(job_name="someone-elses")) is None


def test_same_id_in_two_namespaces_are_two_jobs():
    state = ClusterState()
    state.apply("Job", "ADDED", job(namespace="vision"))
    state.apply("Job", "ADDED", job(namespace="speech", uid="uid-2"))

    assert set(state.jobs) == {("vision", 7), ("speech", 7)}


def test_pod_events_update_the_observation():
    state = ClusterState()
    state.apply("Job", "ADDED", job())
    state.apply("Pod", "ADDED", pod(phase="Pending"))
    assert state.observation(("vision", 7)).state == State.PENDING

    state.apply("Pod", "MODIFIED", pod(phase="Running"))

    assert state.observation(("vision", 7)).state == State.RUNNING


def test_pods_of_an_older_job_with_the_same_name_are_ignored():
    state = ClusterState()
    state.apply("Job", "ADDED", job(uid="uid-new"))
    state.apply("Pod", "ADDED", pod(phase="Running", owner="uid-old"))

    assert state.observation(("vision", 7)).state == State.SUBMITTED


def test_deleted_job_forgets_its_pods_and_events():
    state = ClusterState()
    state.apply("Job", "ADDED", job())
    state.apply("Pod", "ADDED", pod())
    state.apply("Event", "ADDED", quota_event())

    state.apply("Job", "DELETED", job())

    assert state.observation(("vision", 7)) is None
    assert ("vision", 7) not in state.pods
    assert ("vision", 7) not in state.events


def test_a_full_list_replaces_what_was_known_and_names_every_job_touched():
    state = ClusterState()
    state.apply("Pod", "ADDED", pod(name="gpujob-7-a"))
    other = pod(name="gpujob-8-a")
    other["metadata"]["labels"] = {**LABELS, "gpuportal.io/job-id": "8"}
    state.apply("Pod", "ADDED", other)

    touched = state.replace("Pod", [pod(name="gpujob-7-b")])

    assert touched == {("vision", 7), ("vision", 8)}
    assert set(state.pods[("vision", 7)]) == {"gpujob-7-b"}
    assert ("vision", 8) not in state.pods


def test_quota_refusal_event_reaches_the_observation():
    state = ClusterState()
    state.apply("Job", "ADDED", job())
    state.apply("Event", "ADDED", quota_event())

    assert state.observation(("vision", 7)).reason == "ExceededQuota"


def test_deleted_pod_is_forgotten():
    state = ClusterState()
    state.apply("Job", "ADDED", job())
    state.apply("Pod", "ADDED", pod())

    state.apply("Pod", "DELETED", pod())

    assert ("vision", 7) not in state.pods
    assert state.observation(("vision", 7)).state == State.SUBMITTED


def test_an_event_about_a_job_in_another_namespace_has_no_key():
    # Written in speech (where its author may write Events), about vision's Job.
    forged = quota_event(namespace="vision")
    forged["metadata"]["namespace"] = "speech"

    assert key_of("Event", forged) is None


def test_an_event_without_its_own_namespace_has_no_key():
    forged = quota_event()
    del forged["metadata"]["namespace"]

    assert key_of("Event", forged) is None


def test_an_event_about_an_object_that_is_not_a_batch_job_has_no_key():
    assert key_of("Event", quota_event(kind="Pod")) is None
    assert key_of("Event", quota_event(apiVersion="example.com/v1")) is None
    assert key_of("Event", quota_event(apiVersion="")) is None


def test_an_event_about_another_job_of_the_same_name_does_not_count():
    state = ClusterState()
    state.apply("Job", "ADDED", job(uid="uid-1"))
    state.apply("Event", "ADDED", quota_event(uid="uid-older"))

    assert state.observation(("vision", 7)).state == State.SUBMITTED


def test_an_event_without_the_jobs_uid_does_not_count():
    state = ClusterState()
    state.apply("Job", "ADDED", job(uid="uid-1"))
    state.apply("Event", "ADDED", quota_event(uid=""))

    assert state.observation(("vision", 7)).state == State.SUBMITTED


def test_a_forged_event_from_another_namespace_leaves_the_jobs_observation_alone():
    state = ClusterState()
    state.apply("Job", "ADDED", job())
    forged = quota_event()
    forged["metadata"]["namespace"] = "speech"

    assert state.apply("Event", "ADDED", forged) is None
    assert state.observation(("vision", 7)).state == State.SUBMITTED
    assert not state.events


def workload(owner_uid="uid-1", job_name="gpujob-7", namespace="vision", name="job-gpujob-7-x"):
    return {
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": "2026-03-10T10:00:00Z",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": owner_uid}
            ],
        },
        "spec": {},
        "status": {"conditions": []},
    }


def test_a_workload_is_keyed_by_its_owner_job_and_counts_only_for_that_very_job():
    state = ClusterState()
    queued = job()
    queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "guaranteed"
    queued["spec"]["suspend"] = True
    state.apply("Job", "ADDED", queued)

    assert key_of("Workload", workload()) == ("vision", 7)
    assert key_of("Workload", workload(job_name="someone-elses")) is None
    state.apply("Workload", "ADDED", workload(owner_uid="old-uid", name="old"))
    assert state.workload(("vision", 7)) is None
    state.apply("Workload", "ADDED", workload())
    assert state.workload(("vision", 7))["metadata"]["name"] == "job-gpujob-7-x"
    assert state.observation(("vision", 7)).reason == "InQueue"


MANAGED_FIELDS = [{"manager": "gpu-portal", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


def full_job(**status):
    """A Job as the API server returns it: managed fields and the whole pod template."""
    obj = job(**status)
    obj["metadata"]["managedFields"] = MANAGED_FIELDS
    obj["spec"] = {
        "backoffLimit": 1,
        "activeDeadlineSeconds": 60,
        "suspend": False,
        "completions": 1,
        "template": {
            "metadata": {"labels": LABELS, "annotations": {"a": "b"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example.com/team/trainer:1",
                        "command": ["python", "train.py"],
                        "env": [{"name": "EPOCHS", "value": "3"}],
                        "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1", "cpu": "2"}},
                    }
                ],
            },
        },
    }
    return obj


def test_the_state_keeps_only_what_observations_read():
    stored = kept("Job", full_job())

    assert "managedFields" not in stored["metadata"]
    assert stored["metadata"] == {
        key: full_job()["metadata"][key] for key in ("name", "namespace", "uid", "labels")
    }
    assert stored["spec"] == {
        "backoffLimit": 1,
        "activeDeadlineSeconds": 60,
        "suspend": False,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1", "cpu": "2"}},
                    }
                ]
            }
        },
    }
    running = pod()
    running["metadata"]["managedFields"] = MANAGED_FIELDS
    running["spec"]["containers"] = [{"name": "main", "image": "x"}]
    assert kept("Pod", running)["spec"] == {"nodeName": "gpu-node-1"}
    assert "managedFields" not in kept("Pod", running)["metadata"]


def test_keeping_what_was_kept_changes_nothing():
    """The watch trims each object before it queues it and the state trims what it stores:
    a kept object kept again must be the same."""
    running = pod()
    running["metadata"]["managedFields"] = MANAGED_FIELDS
    for kind, whole in (("Job", full_job()), ("Pod", running)):
        once = kept(kind, whole)
        assert kept(kind, once) == once


def test_what_is_kept_observes_as_the_whole_objects_do():
    for status in ({}, {"active": 1}, {"failed": 2}, {"succeeded": 1}):
        whole, pods = full_job(**status), [pod(phase="Failed"), pod("gpujob-7-b")]
        assert observe(kept("Job", whole), [kept("Pod", p) for p in pods], []) == observe(
            whole, pods, []
        )


def conditioned_job(*conditions, **status):
    """A Job whose status carries conditions as the job controller writes them, and the
    fields the observations do not read."""
    obj = full_job(**status)
    obj["status"].update(
        {
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": reason,
                    "message": f"{reason} message",
                    "lastProbeTime": "2026-03-10T10:05:00Z",
                    "lastTransitionTime": "2026-03-10T10:05:00Z",
                }
                for kind, reason in conditions
            ],
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
            "startTime": "2026-03-10T10:00:00Z",
        }
    )
    return obj


def test_of_a_jobs_status_only_what_observations_read_is_kept():
    stored = kept(
        "Job",
        conditioned_job(
            ("Failed", "DeadlineExceeded"), failed=1, completionTime="2026-03-10T10:05:00Z"
        ),
    )

    assert stored["status"] == {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "DeadlineExceeded",
                "message": "DeadlineExceeded message",
                "lastTransitionTime": "2026-03-10T10:05:00Z",
            }
        ],
        "completionTime": "2026-03-10T10:05:00Z",
        "failed": 1,
    }


def test_a_kept_jobs_status_observes_as_the_whole_job_does():
    cases = [
        conditioned_job(("Complete", "CompletionsReached"), succeeded=1),
        conditioned_job(("SuccessCriteriaMet", "CompletionsReached"), succeeded=1),
        conditioned_job(("Failed", "DeadlineExceeded"), failed=1),
        conditioned_job(("Failed", "BackoffLimitExceeded"), failed=2),
        conditioned_job(("FailureTarget", "PodFailurePolicy")),
        conditioned_job(("Suspended", "JobSuspended")),
        conditioned_job(active=1),
    ]
    pods = [pod(phase="Failed"), pod("gpujob-7-b")]
    for whole in cases:
        kept_job, kept_pods = kept("Job", whole), [kept("Pod", p) for p in pods]
        assert observe(kept_job, kept_pods, []) == observe(whole, pods, []), whole["status"]


def test_strings_many_jobs_share_are_kept_once():
    # As two pages of a list arrive: each parsed on its own, with strings of its own.
    first, second = (
        kept("Job", json.loads(json.dumps(conditioned_job(("Suspended", "JobSuspended")))))
        for _ in range(2)
    )
    assert first["status"] is not second["status"]

    for path in (
        lambda j: j["status"]["conditions"][0]["reason"],
        lambda j: j["status"]["conditions"][0]["lastTransitionTime"],
        lambda j: j["kind"],
        lambda j: j["spec"]["template"]["spec"]["containers"][0]["name"],
    ):
        assert path(first) is path(second)


def test_a_full_list_is_taken_out_of_its_list_as_it_is_stored():
    items = [job(job_id="7"), job(job_id="8", uid="uid-2")]
    state = ClusterState()

    state.replace("Job", items)

    assert items == []
    assert set(state.jobs) == {("vision", 7), ("vision", 8)}


def test_a_full_list_keeps_the_last_of_two_objects_with_one_key():
    state = ClusterState()
    state.replace("Job", [job(uid="uid-old"), job(uid="uid-new")])

    assert state.job_uid(("vision", 7)) == "uid-new"
