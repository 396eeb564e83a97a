"""The devcluster's GPU sharing shapes: MIG profile tables, what a node advertises and is labelled
under the GPU Operator's configs, and the sharing nodes' manifests."""

import pytest

from clusters import vocabulary
from devcluster import gpu_sharing as gs
from devcluster import nodes

A100_80 = "NVIDIA-A100-SXM4-80GB"
A100_40 = "NVIDIA-A100-SXM4-40GB"
H100 = "NVIDIA-H100-80GB-HBM3"


def test_the_copied_operator_names_are_the_products():
    for name in (
        "SHARED_GPU_RESOURCE",
        "MIG_RESOURCE_PREFIX",
        "MIG_CONFIG_LABEL",
        "MIG_CONFIG_STATE_LABEL",
        "MIG_STRATEGY_LABEL",
        "MIG_CONFIG_DISABLED",
        "MIG_STATE_SUCCESS",
        "MIG_STATE_FAILED",
        "DEVICE_PLUGIN_CONFIG_LABEL",
        "GPU_REPLICAS_LABEL",
        "GPU_SHARING_STRATEGY_LABEL",
        "SHARED_PRODUCT_SUFFIX",
        "TIME_SLICING_CONFIG_PREFIX",
    ):
        assert getattr(gs, name) == getattr(vocabulary, name), name
    assert vocabulary.mig_config_name("1g.10gb") == "all-1g.10gb"
    assert vocabulary.time_slicing_config_name(4) == "time-slicing-4"


@pytest.mark.parametrize(
    ("product", "expected"),
    [
        (
            A100_80,
            {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
        ),
        (A100_40, {"1g.5gb": 7, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}),
        (
            H100,
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
        ),
    ],
)
def test_every_all_profile_config_cuts_a_gpu_into_as_many_instances_as_fit(product, expected):
    assert {name: p.max_per_gpu for name, p in gs.profiles_for(product).items()} == expected
    for name, count in expected.items():
        assert gs.gpu_layout(product, f"all-{name}") == (name,) * count


def test_a_profile_knows_its_compute_slices_memory_and_resource():
    profile = gs.profiles_for(A100_80)["3g.40gb"]

    assert (profile.compute_slices, profile.memory_gb, profile.memory_mib) == (3, 40, 40960)
    assert profile.resource == "nvidia.com/mig-3g.40gb"


@pytest.mark.parametrize(
    ("product", "layout"),
    [
        (A100_80, ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")),
        (A100_40, ("1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb")),
        (H100, ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")),
    ],
)
def test_all_balanced(product, layout):
    assert gs.gpu_layout(product, "all-balanced") == layout


def test_the_issues_mixed_layout_and_disabled_mig():
    assert gs.gpu_layout(A100_80, gs.CUSTOM_MIXED_CONFIG) == ("3g.40gb", "3g.40gb", "1g.10gb")
    assert gs.gpu_layout(A100_80, "all-disabled") is None
    assert gs.gpu_layout(A100_80, None) is None


@pytest.mark.parametrize(
    ("product", "config"),
    [
        (A100_80, "all-1g.5gb"),  # a 40GB profile
        (A100_80, "all-whatever"),
        (A100_40, gs.CUSTOM_MIXED_CONFIG),
        ("NVIDIA-L40S", "all-1g.10gb"),  # no MIG
    ],
)
def test_unknown_configs_are_refused(product, config):
    with pytest.raises(gs.UnknownConfig):
        gs.gpu_layout(product, config)


def test_replicas_of_device_plugin_configs():
    assert gs.replicas_of(None) == gs.replicas_of("") == 1
    assert gs.replicas_of("time-slicing-4") == 4
    for bad in ("time-slicing-0", "time-slicing-x", "mps-4"):
        with pytest.raises(gs.UnknownConfig):
            gs.replicas_of(bad)


def test_a_mig_node_advertises_each_profile_and_zero_whole_gpus():
    shape = gs.node_shape(A100_80, 2, "all-balanced", "")

    assert shape.resources == {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.10gb": "4",
        "nvidia.com/mig-2g.20gb": "2",
        "nvidia.com/mig-3g.40gb": "2",
    }
    assert shape.labels == {
        "nvidia.com/gpu.product": A100_80,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.count": "4",
        "nvidia.com/mig-2g.20gb.count": "2",
        "nvidia.com/mig-3g.40gb.count": "2",
    }


def test_a_time_sliced_node_advertises_replicas_as_shared_gpus_under_a_shared_product():
    shape = gs.node_shape(A100_80 + "-SHARED", 2, "all-disabled", "time-slicing-4")

    assert shape.resources == {"nvidia.com/gpu.shared": "8"}
    assert shape.labels == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    }
    assert shape.replicas == 4


def test_no_config_is_a_whole_gpu_node():
    shape = gs.node_shape(A100_80, 8, None, None)

    assert shape.resources == {"nvidia.com/gpu": "8"}
    assert shape.layouts == (None,) * 8


def test_patches_delete_what_the_new_shape_no_longer_has():
    current = {"cpu": "96", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}
    labels = {"nvidia.com/mig-1g.10gb.count": "14", "other": "x"}
    shape = gs.node_shape(A100_80, 2, "all-3g.40gb", "")

    assert gs.resource_patch(current, shape.resources) == {
        "nvidia.com/mig-1g.10gb": None,
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-3g.40gb": "4",
    }
    patch = gs.label_patch(labels, shape.labels)
    assert patch["nvidia.com/mig-1g.10gb.count"] is None
    assert patch["nvidia.com/mig-3g.40gb.count"] == "4"
    assert "other" not in patch


def test_replicas_fill_gpu_0_first_and_the_delay_annotation_is_read():
    assert [gs.shared_gpu_of(r, 4) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gs.sharing_delay({}) == gs.DEFAULT_DELAY_SECONDS
    assert gs.sharing_delay({gs.DELAY_ANNOTATION: "0.5"}) == 0.5
    assert gs.sharing_delay({gs.DELAY_ANNOTATION: "soon"}) == gs.DEFAULT_DELAY_SECONDS


def test_the_sharing_nodes_manifests():
    mig, shared, sharable = (spec.to_manifest() for spec in nodes.sharing_node_specs())

    assert mig["metadata"]["name"] == "gpu-node-mig-0"
    assert mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "14"
    assert mig["status"]["allocatable"]["nvidia.com/gpu"] == "0"
    assert mig["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert mig["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert mig["metadata"]["labels"]["nvidia.com/mig.strategy"] == "mixed"
    assert mig["metadata"]["labels"]["nvidia.com/mig-1g.10gb.count"] == "14"
    assert mig["metadata"]["annotations"][gs.MIG_APPLIED_ANNOTATION] == "all-1g.10gb"
    assert shared["status"]["capacity"]["nvidia.com/gpu.shared"] == "8"
    assert "nvidia.com/gpu" not in shared["status"]["allocatable"]
    assert shared["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "time-slicing-4"
    assert shared["metadata"]["labels"]["nvidia.com/gpu.product"] == A100_80 + "-SHARED"
    assert sharable["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert sharable["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "none"
    for manifest in (mig, shared, sharable):
        assert manifest["metadata"]["labels"]["hardware-type"] == "gpu"
        assert manifest["metadata"]["labels"][nodes.SHARING_NODE_LABEL] == "true"
        assert manifest["spec"]["taints"] == [nodes.GPU_TAINT]


def test_a_default_node_is_as_it_always_was():
    manifest = nodes.NodeSpec("gpu-node-0", gpus=8).to_manifest()

    assert manifest["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert not [key for key in manifest["metadata"]["labels"] if "mig" in key or "replicas" in key]
    assert nodes.SHARING_NODE_LABEL not in manifest["metadata"]["labels"]
    assert set(manifest["metadata"]["annotations"]) == {
        "kwok.x-k8s.io/node",
        "node.alpha.kubernetes.io/ttl",
    }
