"""The DCGM simulator's pure arithmetic: GPU assignment, readings and the exposition format."""

from devcluster import dcgm_metrics
from devcluster.dcgm_metrics import ContainerRequest, PodOnNode
from devcluster.gpu_models import KNOWN_MODELS, model_for

A100 = KNOWN_MODELS["NVIDIA-A100-SXM4-80GB"]


def pod(name, gpus, created="2026-01-01T00:00:00Z", namespace="team", utilisation=None):
    containers = tuple(ContainerRequest(name=f"c{i}", gpus=count) for i, count in enumerate(gpus))
    return PodOnNode(namespace, name, created, containers, utilisation)


def test_gpus_are_handed_out_in_creation_order_so_a_newer_pod_never_displaces_an_older_one():
    older = pod("zeta", [2], created="2026-01-01T00:00:00Z")
    newer = pod("alpha", [1], created="2026-01-01T00:00:05Z")

    holders = dcgm_metrics.assign_gpus(8, [newer, older])

    assert {index: holder.pod for index, holder in holders.items()} == {
        0: "zeta",
        1: "zeta",
        2: "alpha",
    }


def test_pods_created_in_the_same_second_are_ordered_by_namespace_then_name():
    pods = [
        pod("b", [1], namespace="x"),
        pod("a", [1], namespace="y"),
        pod("a", [1], namespace="x"),
    ]

    holders = dcgm_metrics.assign_gpus(8, pods)

    order = [(h.namespace, h.pod) for h in holders.values()]
    assert order == [("x", "a"), ("x", "b"), ("y", "a")]


def test_each_container_gets_its_own_gpus_in_spec_order():
    holders = dcgm_metrics.assign_gpus(8, [pod("p", [1, 0, 2])])

    assert [h.container for h in holders.values()] == ["c0", "c2", "c2"]


def test_assignment_stops_when_the_node_runs_out_of_gpus():
    holders = dcgm_metrics.assign_gpus(2, [pod("a", [1]), pod("b", [4], "2026-01-02T00:00:00Z")])

    assert sorted(holders) == [0, 1]
    assert holders[1].pod == "b"


def test_a_pod_without_the_annotation_runs_its_gpus_at_the_default_utilisation():
    holders = dcgm_metrics.assign_gpus(8, [pod("p", [1])])

    assert holders[0].utilisation == dcgm_metrics.DEFAULT_HELD_UTILISATION


def test_a_list_annotation_sets_per_gpu_utilisation_and_the_last_value_repeats():
    utilisation = dcgm_metrics.parse_utilisation("90, 10")

    holders = dcgm_metrics.assign_gpus(8, [pod("p", [3], utilisation=utilisation)])

    assert [h.utilisation for h in holders.values()] == [90.0, 10.0, 10.0]


def test_the_utilisation_annotation_is_clamped_and_garbage_is_ignored():
    assert dcgm_metrics.parse_utilisation("150") == (100.0,)
    assert dcgm_metrics.parse_utilisation("-5") == (0.0,)
    assert dcgm_metrics.parse_utilisation("busy") is None
    assert dcgm_metrics.parse_utilisation(None) is None


def test_an_unheld_gpu_reads_zero_utilisation_and_no_memory_and_carries_no_pod_labels():
    readings = dcgm_metrics.node_readings("gpu-node-0", A100, 2, [pod("p", [1])])

    idle = readings[1]
    assert idle.values["DCGM_FI_DEV_GPU_UTIL"] == 0
    assert idle.values["DCGM_FI_DEV_FB_USED"] == 0
    assert idle.values["DCGM_FI_DEV_FB_FREE"] == A100.memory_mib
    assert idle.values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0
    assert idle.values["DCGM_FI_DEV_POWER_USAGE"] == A100.idle_power_watts
    assert "pod" not in idle.labels
    assert "namespace" not in idle.labels


def test_a_held_gpu_carries_its_pods_namespace_pod_and_container_labels():
    readings = dcgm_metrics.node_readings("gpu-node-0", A100, 1, [pod("trainer", [1])])

    labels = readings[0].labels
    assert labels["namespace"] == "team"
    assert labels["pod"] == "trainer"
    assert labels["container"] == "c0"
    assert labels["Hostname"] == "gpu-node-0"
    assert labels["modelName"] == "NVIDIA A100-SXM4-80GB"
    assert labels["gpu"] == "0"
    assert labels["device"] == "nvidia0"


def test_every_reading_follows_from_utilisation():
    values = dcgm_metrics.readings_for_utilisation(A100, 50.0, held=True)

    assert values["DCGM_FI_DEV_GPU_UTIL"] == 50
    assert values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.5
    assert values["DCGM_FI_DEV_FB_USED"] == round(81920 * 0.5)
    assert values["DCGM_FI_DEV_FB_USED"] + values["DCGM_FI_DEV_FB_FREE"] == 81920
    assert values["DCGM_FI_DEV_GPU_TEMP"] == 55
    assert values["DCGM_FI_DEV_POWER_USAGE"] == 230.0


def test_gpu_uuids_are_stable_per_node_and_index_and_distinct_otherwise():
    assert dcgm_metrics.gpu_uuid("n", 0) == dcgm_metrics.gpu_uuid("n", 0)
    assert dcgm_metrics.gpu_uuid("n", 0) != dcgm_metrics.gpu_uuid("n", 1)
    assert dcgm_metrics.gpu_uuid("n", 0) != dcgm_metrics.gpu_uuid("m", 0)
    assert dcgm_metrics.gpu_uuid("n", 0).startswith("GPU-")


def test_the_exposition_has_one_gauge_family_per_dcgm_metric():
    readings = dcgm_metrics.node_readings("n", A100, 2, [pod("p", [1], utilisation=(73.0,))])

    text = dcgm_metrics.render_exposition(readings)

    for metric in dcgm_metrics.METRIC_HELP:
        assert f"# TYPE {metric} gauge" in text
        assert text.count(f"\n{metric}{{") + text.startswith(metric) == 2
    assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0",' in text
    assert 'namespace="team",pod="p"} 73\n' in text


def test_label_values_are_escaped():
    assert dcgm_metrics.format_labels({"a": 'x"y\\z\n'}) == '{a="x\\"y\\\\z\\n"}'


def test_an_unknown_gpu_model_gets_a_readable_name_and_default_figures():
    model = model_for("NVIDIA-B200")

    assert model.model_name == "NVIDIA B200"
    assert model.memory_mib == A100.memory_mib
