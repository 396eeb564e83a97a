"""A revision's state from its Deployment, ReplicaSets and pods: replicas ready, and why not
(the quota, no GPU node with room, the image, the readiness probe); a rollout's progress."""

from types import SimpleNamespace

from serving.observe import ServiceReason, observe_revision, rollout_progress


def deployment(replicas=2, conditions=()):
    return {
        "metadata": {"name": "llm-r1"},
        "spec": {"replicas": replicas},
        "status": {"updatedReplicas": replicas, "conditions": list(conditions)},
    }


def pod(name, *, phase="Running", ready=True, node="gpu-node-0", waiting=None, scheduled=None):
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "message": scheduled})
    status = {"phase": phase, "conditions": conditions}
    if waiting:
        status["containerStatuses"] = [{"name": "server", "state": {"waiting": waiting}}]
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }


def test_all_replicas_ready():
    seen = observe_revision(deployment(), [], [pod("b"), pod("a", node="gpu-node-1")])

    assert (seen.desired, seen.ready, seen.reason) == (2, 2, ServiceReason.READY)
    assert seen.pods == ("a", "b")
    assert seen.nodes == ("gpu-node-0", "gpu-node-1")


def test_a_quota_refusal_is_read_from_the_replica_set():
    refused = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": 'pods "llm-r1-x-y" is forbidden: exceeded quota: gpu-portal-quota, requested: '
        "requests.nvidia.com/gpu=1",
    }
    replica_set = {"metadata": {"name": "llm-r1-x"}, "status": {"conditions": [refused]}}

    seen = observe_revision(deployment(3), [replica_set], [pod("a"), pod("b")])

    assert seen.reason == "ExceededQuota"
    assert seen.message.startswith("2 of 3 replicas ready. The team's GPU quota is used up")


def test_a_pod_no_gpu_node_can_take_says_so():
    waiting = pod(
        "c",
        phase="Pending",
        ready=False,
        node=None,
        scheduled="0/8 nodes are available: 6 Insufficient nvidia.com/gpu.",
    )

    seen = observe_revision(deployment(3), [], [pod("a"), pod("b"), waiting])

    assert seen.reason == "InsufficientGPUs"
    assert "No GPU node has enough free GPUs" in seen.message


def test_an_image_that_cannot_be_pulled_says_so():
    pulling = pod("a", phase="Pending", ready=False, waiting={"reason": "ImagePullBackOff"})

    seen = observe_revision(deployment(1), [], [pulling])

    assert seen.reason == "ImagePullFailed"


def test_running_replicas_waiting_for_the_probe():
    seen = observe_revision(deployment(2), [], [pod("a"), pod("b", ready=False)])

    assert (seen.ready, seen.reason) == (1, ServiceReason.NOT_READY)


def test_scaled_to_zero_is_stopped():
    assert observe_revision(deployment(0), [], []).reason == ServiceReason.STOPPED


def test_no_deployment_is_removed():
    assert observe_revision(None, [], []).reason == ServiceReason.REMOVED


def test_terminating_pods_do_not_count():
    going = pod("a")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    seen = observe_revision(deployment(1), [], [going])

    assert (seen.current, seen.ready) == (0, 0)


def r(number, role, *, ready=0, replicas=2, weight=100, variant=""):
    return SimpleNamespace(
        number=number,
        role=role,
        ready_replicas=ready,
        replicas=replicas,
        weight=weight,
        variant=variant,
    )


def test_rollout_progress_in_words():
    assert "Canary r2 takes 10% (1 of 1 replicas ready)" in rollout_progress(
        rollout="canary",
        state="active",
        revisions=[r(1, "stable", weight=90), r(2, "candidate", ready=1, replicas=1, weight=10)],
    )
    assert "Rolling out r2" in rollout_progress(
        rollout="rolling", state="active", revisions=[r(1, "stable"), r(2, "candidate", weight=0)]
    )
    assert rollout_progress(rollout="none", state="stopped", revisions=[]).startswith("Stopped")
