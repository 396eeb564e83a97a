"""The DCGM simulator's arithmetic for shared GPUs: MIG instances handed out per profile with
dcgm-exporter's GPU_I_* labels and no GPU_UTIL, and each pod's share of a time-sliced GPU."""

from devcluster import dcgm_metrics
from devcluster import gpu_sharing as gs
from devcluster.dcgm_metrics import ContainerRequest, PodOnNode
from devcluster.gpu_models import KNOWN_MODELS

A100 = KNOWN_MODELS["NVIDIA-A100-SXM4-80GB"]
PROFILES = gs.profiles_for(A100.product_label)


def pod(name, count, created="2026-01-01T00:00:00Z", utilisation=None):
    return PodOnNode("team", name, created, (ContainerRequest("main", count),), utilisation)


def test_instances_are_listed_per_gpu_and_slot_with_the_slot_as_their_id():
    layouts = gs.node_shape(A100.product_label, 2, gs.CUSTOM_MIXED_CONFIG, "").layouts

    instances = dcgm_metrics.mig_instances(layouts, PROFILES)

    assert [(i.gpu, i.instance_id, i.profile.name) for i in instances] == [
        (0, 0, "3g.40gb"),
        (0, 1, "3g.40gb"),
        (0, 2, "1g.10gb"),
        (1, 0, "3g.40gb"),
        (1, 1, "3g.40gb"),
        (1, 2, "1g.10gb"),
    ]


def test_each_profiles_instances_go_to_the_pods_asking_for_it_in_creation_order_and_stay():
    layouts = gs.node_shape(A100.product_label, 2, gs.CUSTOM_MIXED_CONFIG, "").layouts
    instances = dcgm_metrics.mig_instances(layouts, PROFILES)
    older = pod("older", 1, created="2026-01-01T00:00:00Z")
    newer = pod("newer", 2, created="2026-01-01T00:00:05Z")

    first = dcgm_metrics.assign_mig_instances(instances, {"3g.40gb": [newer, older]})
    again = dcgm_metrics.assign_mig_instances(instances, {"3g.40gb": [newer]}, first)

    assert {i: h.pod for i, h in first["3g.40gb"].items()} == {0: "older", 1: "newer", 2: "newer"}
    assert first["1g.10gb"] == {}
    assert {i: h.pod for i, h in again["3g.40gb"].items()} == {1: "newer", 2: "newer"}


def test_an_instance_series_carries_gpu_i_labels_its_pod_and_no_gpu_util():
    layouts = gs.node_shape(A100.product_label, 1, "all-1g.10gb", "").layouts
    instances = dcgm_metrics.mig_instances(layouts, PROFILES)
    holders = dcgm_metrics.assign_mig_instances(
        instances, {"1g.10gb": [pod("a", 1, utilisation=(50.0,))]}
    )

    readings = dcgm_metrics.mig_readings("node-1", A100, instances, holders)

    physical, held, free = readings[0], readings[1], readings[2]
    assert set(physical.values) == {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"}
    assert "GPU_I_ID" not in physical.labels
    assert "pod" not in physical.labels
    assert held.labels["GPU_I_PROFILE"] == "1g.10gb"
    assert held.labels["GPU_I_ID"] == "0"
    assert held.labels["gpu"] == "0"
    assert held.labels["UUID"] == dcgm_metrics.gpu_uuid("node-1", 0)
    assert (held.labels["namespace"], held.labels["pod"], held.labels["container"]) == (
        "team",
        "a",
        "main",
    )
    assert held.values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.5
    assert held.values["DCGM_FI_DEV_FB_USED"] + held.values["DCGM_FI_DEV_FB_FREE"] == 10240
    assert held.values["DCGM_FI_DEV_FB_USED"] == round(10240 * (0.10 + 0.80 * 0.5))
    assert "DCGM_FI_DEV_GPU_UTIL" not in held.values
    assert free.labels["GPU_I_ID"] == "1"
    assert "pod" not in free.labels
    assert free.values == {
        "DCGM_FI_DEV_FB_USED": 0.0,
        "DCGM_FI_DEV_FB_FREE": 10240.0,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.0,
    }
    assert len(readings) == 1 + 7
    # a MIG GPU's power follows its instances' compute slices: 1 of 7 at 50%
    expected = dcgm_metrics.readings_for_utilisation(A100, 50 / 7, True)
    assert physical.values["DCGM_FI_DEV_POWER_USAGE"] == expected["DCGM_FI_DEV_POWER_USAGE"]


def test_the_exposition_leaves_out_what_an_instance_does_not_publish():
    layouts = gs.node_shape(A100.product_label, 1, "all-7g.80gb", "").layouts
    instances = dcgm_metrics.mig_instances(layouts, PROFILES)
    text = dcgm_metrics.render_exposition(
        dcgm_metrics.mig_readings("n", A100, instances, {"7g.80gb": {}})
    )

    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert [line.split("{")[0] for line in samples] == [
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    ]
    assert 'GPU_I_PROFILE="7g.80gb"' in samples[0]


def test_replicas_fill_gpu_0_first_and_each_sharer_gets_its_share():
    pods = [
        pod("a", 1, "2026-01-01T00:00:00Z", (60.0,)),
        pod("b", 2, "2026-01-01T00:00:01Z", (30.0,)),
        pod("c", 2, "2026-01-01T00:00:02Z", (90.0,)),
    ]
    holders = dcgm_metrics.assign_gpus(2 * 4, pods)

    sharers = dcgm_metrics.gpu_sharers(2, 4, holders)
    readings = dcgm_metrics.shared_gpu_readings("n", A100, 2, 4, holders)

    assert {gpu: [h.pod for h in hs] for gpu, hs in sharers.items()} == {
        0: ["a", "b", "c"],
        1: ["c"],
    }
    utils = [(r.labels["gpu"], r.labels["pod"], r.values["DCGM_FI_DEV_GPU_UTIL"]) for r in readings]
    assert utils == [("0", "a", 20.0), ("0", "b", 10.0), ("0", "c", 30.0), ("1", "c", 90.0)]
    assert readings[0].values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.2
    # the physical GPU's other readings are at the sum of the shares, on every sharer's series
    total = dcgm_metrics.readings_for_utilisation(A100, 60.0, True)
    assert readings[1].values["DCGM_FI_DEV_POWER_USAGE"] == total["DCGM_FI_DEV_POWER_USAGE"]


def test_shares_of_a_gpu_never_sum_over_100_and_an_unshared_gpu_reads_0_without_pod_labels():
    pods = [pod(f"p{i}", 1, f"2026-01-01T00:00:0{i}Z", (100.0,)) for i in range(6)]
    holders = dcgm_metrics.assign_gpus(2 * 6, pods)

    readings = dcgm_metrics.shared_gpu_readings("n", A100, 2, 6, holders)

    shares = [r.values["DCGM_FI_DEV_GPU_UTIL"] for r in readings if r.labels["gpu"] == "0"]
    assert shares == [16.66] * 6
    assert sum(shares) <= 100
    (idle,) = [r for r in readings if r.labels["gpu"] == "1"]
    assert "pod" not in idle.labels
    assert idle.values["DCGM_FI_DEV_GPU_UTIL"] == 0.0
    assert idle.values["DCGM_FI_DEV_FB_USED"] == 0.0
