"""What a pod holds, as Prometheus' own engine (``promtool test rules``) counts it with
``promql.pod_gpu_kinds`` on the DCGM series of ``test_gpu_slices_promql``, and as
``monitoring.pod_gpus`` then weighs and words it: a slice reads as a slice, a share of a shared
GPU as a replica, and their GPU equivalents add up to what ``promql.gpus_held`` says."""

import pytest

from monitoring import pod_gpus, promql

from .test_gpu_slices_promql import A100, CONFIG, MIG_NODE, NODE, SHARED_NODE, evaluate

pytestmark = pytest.mark.integration


def kind(namespace, pod, node, count, profile=""):
    labels = {"namespace": namespace, "pod": pod, "Hostname": node, "modelName": A100}
    if profile:
        labels["GPU_I_PROFILE"] = profile
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return labels, {"labels": f"{{{text}}}", "value": count}


EXPECTED = [
    kind("team-a", "whole", NODE, 1),
    kind("team-a", "big", MIG_NODE, 1, "3g.40gb"),
    kind("team-b", "busy", MIG_NODE, 1, "1g.10gb"),
    kind("team-b", "idle", MIG_NODE, 1, "1g.10gb"),
    kind("team-c", "share-busy", SHARED_NODE, 1),
    kind("team-c", "share-idle", SHARED_NODE, 1),
]


def test_pod_gpu_kinds_tells_each_pods_whole_gpus_slices_and_shares_apart(tmp_path, promtool):
    evaluate(tmp_path, promtool, [(promql.pod_gpu_kinds(CONFIG), [s for _, s in EXPECTED])])


def test_each_pods_kinds_read_as_what_they_are_and_add_up_to_the_gpus_held():
    holdings = pod_gpus.holdings_by_pod(
        [(labels, sample["value"]) for labels, sample in EXPECTED],
        pod_key=("namespace", "pod"),
        node_label=promql.NODE_LABEL,
        model_label=promql.MODEL_LABEL,
        profile_label=promql.MIG_PROFILE_LABEL,
        shared_nodes={node: r for r, nodes in CONFIG.shared_nodes for node in nodes},
    )

    described = {pod: pod_gpus.describe(held) for (_, pod), held in holdings.items()}
    assert described == {
        "whole": "1 GPU",
        "big": "1 × 3g.40gb slice (3/7 GPU)",
        "busy": "1 × 1g.10gb slice (1/7 GPU)",
        "idle": "1 × 1g.10gb slice (1/7 GPU)",
        "share-busy": "1 shared GPU replica (1/4 GPU)",
        "share-idle": "1 shared GPU replica (1/4 GPU)",
    }
    by_team: dict[str, float] = {}
    for (namespace, _), held in holdings.items():
        by_team[namespace] = by_team.get(namespace, 0.0) + pod_gpus.gpu_equivalents(held)
    # What test_gpu_slices_promql finds promql.gpus_held_by_namespace says of the same series.
    assert by_team == {
        "team-a": pytest.approx(1 + 3 / 7),
        "team-b": pytest.approx(2 / 7),
        "team-c": pytest.approx(0.5),
    }
