"""Which nodes a layout changes: whole nodes of the model with no GPU work, covering the ask with
the fewest GPUs beyond it; and why none, in words."""

from clusters.node_sharing import gpu_pods_on, node_sharing
from sharing.placement import candidates, pick_nodes, why_none

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
LABEL = "nvidia.com/gpu.product"


def node(name, gpus=8, model=A100, *, labels=None, ready=True, cordoned=False, extra=None):
    allocatable = {"nvidia.com/gpu": str(gpus), "cpu": "64", **(extra or {})}
    return {
        "metadata": {"name": name, "labels": {LABEL: model, **(labels or {})}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name, node_name, resources, *, phase="Running", namespace="speech"):
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": resources}}]},
        "status": {"phase": phase},
    }


def found(nodes, pods=(), model=A100):
    readings = [node_sharing(n, model_label=LABEL) for n in nodes]
    return candidates(readings, gpu_pods_on(pods), gpu_model=model)


def test_the_exact_fit_wins_over_a_bigger_node():
    free = found([node("big", 8), node("small", 2)]).free

    pick = pick_nodes(free, 2)

    assert pick.nodes == {"small": 2}
    assert pick.extra == 0


def test_fewest_gpus_beyond_the_ask_then_fewest_nodes():
    free = found([node("a", 4), node("b", 4), node("c", 8), node("d", 2), node("e", 6)]).free

    assert pick_nodes(free, 8).nodes == {"c": 8}
    assert pick_nodes(free, 10).nodes == {"a": 4, "e": 6}
    assert pick_nodes(free, 3).nodes == {"a": 4}
    assert pick_nodes(free, 3).extra == 1


def test_nodes_of_other_models_shared_busy_or_not_ready_are_not_candidates():
    nodes = [
        node("h100", model=H100),
        node("mig", labels={"nvidia.com/mig.config": "all-1g.10gb"}),
        node("sliced", 0, extra={"nvidia.com/mig-1g.10gb": "14"}),
        node("timesliced", labels={"nvidia.com/device-plugin.config": "time-slicing-4"}),
        node("whole-again", 2, labels={"nvidia.com/mig.config": "all-disabled"}),
        node("down", ready=False),
        node("cordoned", cordoned=True),
        node("busy"),
        node("drained"),
    ]
    pods = [
        pod("train", "busy", {"nvidia.com/gpu": "1"}),
        pod("done", "drained", {"nvidia.com/gpu": "8"}, phase="Succeeded"),
        pod("web", "drained", {"cpu": "1"}),
    ]

    result = found(nodes, pods)

    assert [n.name for n in result.free] == ["drained", "whole-again"]
    assert list(result.busy) == ["busy"]
    assert result.shared == ["mig", "sliced", "timesliced"]
    assert result.unusable == ["cordoned", "down"]


def test_a_pod_asking_for_any_gpu_kind_holds_its_node():
    pods = [pod("slice", "n", {"nvidia.com/mig-1g.10gb": "1"}), pod("amd", "m", {"amd.com/gpu": 1})]

    result = found([node("n"), node("m")], pods)

    assert result.free == []
    assert sorted(result.busy) == ["m", "n"]


def test_none_when_the_free_nodes_do_not_cover_the_ask_and_says_why():
    nodes = [
        node("free", 2),
        node("busy", 8),
        node("mig", labels={"nvidia.com/mig.config": "all-1g.10gb"}),
    ]
    result = found(nodes, [pod("train", "busy", {"nvidia.com/gpu": "8"}, namespace="speech")])

    assert pick_nodes(result.free, 4) is None
    why = why_none(result, gpus=4, gpu_model=A100)
    assert "free ones (free) hold 2" in why
    assert "busy runs speech/train" in why
    assert "Already shared or partitioned: mig" in why
