"""The one table of how much of a GPU a kind is, and the names the per-GPU charts give slices."""

from fractions import Fraction

import pytest

from clusters.inventory import gpu_model_inventory, shared_gpu_replicas
from monitoring.charts import gpu_name
from monitoring.gpu_shares import base_model, gpu_share


@pytest.mark.parametrize(
    ("resource", "model", "replicas", "share"),
    [
        ("nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3", 1, Fraction(1)),
        ("nvidia.com/mig-3g.40gb", "NVIDIA-A100-SXM4-80GB", 1, Fraction(3, 7)),
        ("nvidia.com/mig-1g.6gb", "NVIDIA-A30", 1, Fraction(1, 4)),
        ("nvidia.com/mig-1g.18gb", "NVIDIA-H200", 1, Fraction(1, 7)),  # not in the table
        ("nvidia.com/gpu.shared", "NVIDIA-A100-SXM4-80GB-SHARED", 4, Fraction(1, 4)),
        ("nvidia.com/gpu.shared", "NVIDIA-A100-SXM4-80GB-SHARED", 0, Fraction(1)),
    ],
)
def test_each_kind_is_its_share_of_a_gpu(resource, model, replicas, share):
    assert gpu_share(resource, model, replicas) == share


def test_a_shared_model_is_priced_as_its_base_model():
    assert base_model("NVIDIA-A100-SXM4-80GB-SHARED") == "NVIDIA-A100-SXM4-80GB"
    assert base_model("NVIDIA-A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"


def test_a_mig_instance_is_named_under_its_gpu():
    whole = {"Hostname": "gpu-node-mig-0", "gpu": "0"}
    instance = {**whole, "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "1"}
    assert gpu_name(whole) == "gpu-node-mig-0 · GPU 0"
    assert gpu_name(instance) == "gpu-node-mig-0 · GPU 0 · 1g.10gb #1"


def _node(name, labels, allocatable, ready=True):
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_the_capacity_sync_reads_the_replicas_of_shared_gpus_from_the_nodes():
    product = "nvidia.com/gpu.product"
    nodes = [
        _node(
            "gpu-node-shared-0",
            {product: "A100-SHARED", "nvidia.com/gpu.replicas": "4"},
            {"nvidia.com/gpu.shared": "8"},
        ),
        _node("gpu-node-0", {product: "A100"}, {"nvidia.com/gpu": "8"}),
    ]
    models = gpu_model_inventory(nodes, model_label=product)
    assert models[("nvidia.com/gpu.shared", "A100-SHARED")].replicas == 4
    assert models[("nvidia.com/gpu", "A100")].replicas == 1
    assert shared_gpu_replicas(nodes) == {"gpu-node-shared-0": 4}
