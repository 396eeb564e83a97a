"""The simulated GPU models: how each is labelled on a node and what DCGM reports for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    """One GPU model as the NVIDIA device plugin labels it and the DCGM exporter names it."""

    product_label: str  # value of the node label nvidia.com/gpu.product (spaces become dashes)
    model_name: str  # DCGM's modelName label
    memory_mib: int  # framebuffer size
    idle_power_watts: float
    max_power_watts: float


DEFAULT_GPU_MODEL = "NVIDIA-A100-SXM4-80GB"
# The model of the devcluster's second group of GPU nodes, so that quota per model is real.
DEFAULT_SECOND_GPU_MODEL = "NVIDIA-H100-80GB-HBM3"

KNOWN_MODELS = {
    model.product_label: model
    for model in (
        GpuModel("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 81920, 60.0, 400.0),
        GpuModel("NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 40960, 55.0, 400.0),
        GpuModel("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 81559, 70.0, 700.0),
        GpuModel("NVIDIA-L40S", "NVIDIA L40S", 46068, 35.0, 350.0),
        GpuModel("NVIDIA-L4", "NVIDIA L4", 23034, 16.0, 72.0),
        GpuModel("Tesla-T4", "Tesla T4", 15360, 10.0, 70.0),
    )
}


def model_for(product_label: str) -> GpuModel:
    """The model for a node's nvidia.com/gpu.product label; unknown labels get A100-like figures."""
    if product_label in KNOWN_MODELS:
        return KNOWN_MODELS[product_label]
    fallback = KNOWN_MODELS[DEFAULT_GPU_MODEL]
    return GpuModel(
        product_label=product_label,
        model_name=product_label.replace("-", " ", 1),
        memory_mib=fallback.memory_mib,
        idle_power_watts=fallback.idle_power_watts,
        max_power_watts=fallback.max_power_watts,
    )
