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


def gpus_of(holders):
    """pod name -> the GPU indices it holds, from an assignment."""
    held = {}
    for index, holder in holders.items():
        held.setdefault(holder.pod, []).append(index)
    return held


def test_a_pod_keeps_its_gpus_when_an_earlier_pod_ends_and_a_new_pod_takes_the_freed_ones():
    a = pod("a", [2], created="2026-01-01T00:00:00Z")
    b = pod("b", [2], created="2026-01-01T00:00:05Z")
    c = pod("c", [2], created="2026-01-01T00:01:00Z")

    first = dcgm_metrics.assign_gpus(8, [a, b])
    after_a_ends = dcgm_metrics.assign_gpus(8, [b, c], first)

    assert gpus_of(first) == {"a": [0, 1], "b": [2, 3]}
    assert gpus_of(after_a_ends) == {"b": [2, 3], "c": [0, 1]}


def test_a_pod_keeps_its_gpus_over_many_scrapes_while_other_pods_come_and_go():
    early = pod("early", [3], created="2026-01-01T00:00:00Z")
    keeper = pod("keeper", [2], created="2026-01-01T00:00:10Z")
    # p0, p1, ... of 1 and 2 GPUs, created a minute apart; each runs for three scrapes
    others = [
        pod(f"p{i}", [1 + i % 2], created=f"2026-01-01T00:{i + 1:02d}:00Z") for i in range(30)
    ]
    holders = dcgm_metrics.assign_gpus(8, [early, keeper])
    assert gpus_of(holders) == {"early": [0, 1, 2], "keeper": [3, 4]}
    first_held = {}
    for scrape in range(33):
        running = [keeper, *others[max(0, scrape - 2) : scrape + 1]]
        if scrape < 2:  # early ends before the third scrape
            running.append(early)
        holders = dcgm_metrics.assign_gpus(8, running, holders)

        held = gpus_of(holders)
        assert held["keeper"] == [3, 4], f"keeper moved at scrape {scrape}"
        assert sorted(held) == sorted(p.name for p in running)  # no pod ends up short here
        for name, indices in held.items():
            assert first_held.setdefault(name, indices) == indices, f"{name} moved at {scrape}"
    assert first_held["p0"] == [5]
    assert first_held["p1"] == [6, 7]
    assert first_held["p2"] == [0]  # the lowest of the GPUs early freed
    assert first_held["p3"] == [1, 2]


def test_a_new_pod_takes_the_lowest_free_indices_even_when_they_are_not_contiguous():
    pods = [pod(name, [1], created=f"2026-01-01T00:00:0{i}Z") for i, name in enumerate("abcd")]
    holders = dcgm_metrics.assign_gpus(4, pods)

    holders = dcgm_metrics.assign_gpus(
        4, [pods[1], pods[3], pod("e", [2], created="2026-01-01T00:01:00Z")], holders
    )

    assert gpus_of(holders) == {"b": [1], "d": [3], "e": [0, 2]}


def test_without_a_previous_assignment_gpus_are_packed_afresh_in_creation_order():
    a = pod("a", [2], created="2026-01-01T00:00:00Z")
    b = pod("b", [2], created="2026-01-01T00:00:05Z")
    c = pod("c", [2], created="2026-01-01T00:01:00Z")
    sticky = dcgm_metrics.assign_gpus(8, [b, c], dcgm_metrics.assign_gpus(8, [a, b]))

    after_restart = dcgm_metrics.assign_gpus(8, [c, b])

    assert gpus_of(sticky) == {"b": [2, 3], "c": [0, 1]}
    assert gpus_of(after_restart) == {"b": [0, 1], "c": [2, 3]}
    assert dcgm_metrics.assign_gpus(8, [c, b], None) == after_restart


def test_a_pod_recreated_under_the_same_name_is_a_new_holder():
    first = pod("first", [1], created="2026-01-01T00:00:00Z")
    old = pod("worker-0", [1], created="2026-01-01T00:00:05Z")
    holders = dcgm_metrics.assign_gpus(2, [first, old])
    assert gpus_of(holders) == {"first": [0], "worker-0": [1]}
    recreated = pod("worker-0", [1], created="2026-01-01T00:02:00Z")

    holders = dcgm_metrics.assign_gpus(2, [recreated], holders)

    assert gpus_of(holders) == {"worker-0": [0]}  # the lowest free GPU, not the old pod's
    assert holders[0].created == "2026-01-01T00:02:00Z"


def test_a_container_left_short_takes_freed_gpus_before_a_newer_pod():
    a = pod("a", [2], created="2026-01-01T00:00:00Z")
    b = pod("b", [3], created="2026-01-01T00:00:05Z")
    holders = dcgm_metrics.assign_gpus(4, [a, b])
    assert gpus_of(holders) == {"a": [0, 1], "b": [2, 3]}  # b asked for 3 and got what was free
    c = pod("c", [1], created="2026-01-01T00:01:00Z")

    holders = dcgm_metrics.assign_gpus(4, [b, c], holders)

    assert gpus_of(holders) == {"b": [0, 2, 3], "c": [1]}


def test_a_kept_gpu_keeps_its_per_gpu_utilisation():
    a = pod("a", [1], created="2026-01-01T00:00:00Z")
    b = pod("b", [2], created="2026-01-01T00:00:05Z", utilisation=(90.0, 10.0))
    holders = dcgm_metrics.assign_gpus(8, [a, b])

    holders = dcgm_metrics.assign_gpus(8, [b, pod("c", [1], "2026-01-01T00:01:00Z")], holders)

    assert (holders[1].pod, holders[1].utilisation) == ("b", 90.0)
    assert (holders[2].pod, holders[2].utilisation) == ("b", 10.0)


def test_gpus_the_node_no_longer_has_are_dropped_from_the_previous_assignment():
    holders = dcgm_metrics.assign_gpus(8, [pod("a", [2]), pod("b", [2], "2026-01-01T00:00:05Z")])

    holders = dcgm_metrics.assign_gpus(3, [pod("b", [2], "2026-01-01T00:00:05Z")], holders)

    assert gpus_of(holders) == {"b": [0, 2]}


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
