"""GPUs held outside the queue: which pods count (bound, unfinished, asking for a GPU of any
kind, in a team's namespace, with no admitted Workload standing for the pod or its Job), and
how the snapshot carries them to the team's and the cluster's views."""

from gpujobs.queues import (
    NAMED_PODS_HELD_OUTSIDE,
    HeldOutside,
    Snapshot,
    admitted_owners,
    gpu_pod_holding,
    held_outside,
    snapshot_fields,
)

from .test_waiting import FA, cq, snapshot


def pod(
    name,
    *,
    namespace="vision",
    gpus=1,
    resource="nvidia.com/gpu",
    node="gpu-1",
    phase="Running",
    owner_uid="",
    init_gpus=0,
):
    spec = {
        "containers": [{"name": "main", "resources": {"limits": {resource: str(gpus)}}}]
        if gpus
        else [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
    }
    if init_gpus:
        spec["initContainers"] = [
            {"name": "init", "resources": {"limits": {resource: str(init_gpus)}}}
        ]
    if node:
        spec["nodeName"] = node
    owners = [{"kind": "Job", "uid": owner_uid, "controller": True}] if owner_uid else []
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{name}",
            "ownerReferences": owners,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def workload(*owner_uids, condition="Admitted", status="True"):
    return {
        "metadata": {"ownerReferences": [{"kind": "Job", "uid": uid} for uid in owner_uids]},
        "status": {"conditions": [{"type": condition, "status": status}]},
    }


def test_a_bound_unfinished_gpu_pod_is_kept_with_its_gpus_and_controller():
    kept = gpu_pod_holding(pod("train", gpus=2, owner_uid="job-1"))

    assert kept == {
        "namespace": "vision",
        "name": "train",
        "uid": "uid-train",
        "controller": "job-1",
        "gpus": 2,
    }


def test_mig_and_shared_gpus_count_and_an_init_container_asking_more_sets_the_figure():
    assert gpu_pod_holding(pod("mig", resource="nvidia.com/mig-1g.10gb", gpus=3))["gpus"] == 3
    assert gpu_pod_holding(pod("init", gpus=1, init_gpus=4))["gpus"] == 4


def test_pods_that_hold_no_gpu_are_not_kept():
    assert gpu_pod_holding(pod("cpu", gpus=0)) is None
    assert gpu_pod_holding(pod("unbound", node="")) is None
    assert gpu_pod_holding(pod("done", phase="Succeeded")) is None
    assert gpu_pod_holding(pod("broken", phase="Failed")) is None


def test_only_admitted_or_quota_reserving_workloads_stand_for_their_owners():
    assert admitted_owners(workload("job-1", "job-2")) == ["job-1", "job-2"]
    assert admitted_owners(workload("job-1", condition="QuotaReserved")) == ["job-1"]
    assert admitted_owners(workload("job-1", status="False")) == []
    assert admitted_owners({"metadata": {"ownerReferences": [{"uid": "x"}]}}) == []


def test_pods_kueue_admitted_itself_or_through_their_job_are_not_held_outside():
    pods = [
        gpu_pod_holding(p)
        for p in (
            pod("by-hand", gpus=2),
            pod("queued-job-pod", gpus=4, owner_uid="job-1"),
            pod("queued-pod", gpus=1),
            pod("old-job-pod", gpus=1, owner_uid="job-old"),
            pod("elsewhere", namespace="kube-system", gpus=8),
        )
    ]

    held = held_outside(pods, {"job-1", "uid-queued-pod"}, teams={"vision", "nlp"})

    assert held == {"vision": {"gpus": 3, "pods": 2, "names": ["by-hand", "old-job-pod"]}}


def test_names_stop_at_the_first_few_while_the_counts_go_on():
    count = NAMED_PODS_HELD_OUTSIDE + 5
    pods = [gpu_pod_holding(pod(f"p{i:02}")) for i in range(count)]

    (held,) = held_outside(pods, set(), teams={"vision"}).values()

    assert held["pods"] == held["gpus"] == count
    assert held["names"] == [f"p{i:02}" for i in range(NAMED_PODS_HELD_OUTSIDE)]


def test_the_snapshot_carries_each_teams_figure_read_back():
    queues = [cq("gpu-portal-vision", "vision", flavors={FA: (8, None, None)})]
    fields = snapshot_fields(
        cluster_queues=queues,
        resource_flavors=[],
        pending={},
        portal_name="gpu-portal",
        gpu_model_label="nvidia.com/gpu.product",
        gpu_pods=[gpu_pod_holding(pod("by-hand", gpus=2))],
        admitted=set(),
    )

    assert fields["held_outside"] == {"vision": {"gpus": 2, "pods": 1, "names": ["by-hand"]}}
    assert snapshot(queues).held_outside == {}


def test_a_snapshot_row_reads_back_as_held_outside_figures():
    class Row:
        taken_at = None
        flavors = {}
        cluster_queues = []
        pending = []
        kueue_error = ""
        kueue_error_since = None
        held_outside = {"vision": {"gpus": 2, "pods": 1, "names": ["by-hand"]}}

    assert Snapshot.from_row(Row()).held_outside == {
        "vision": HeldOutside(gpus=2, pods=1, names=("by-hand",))
    }
