"""What a sharing layout makes of whole GPUs, in resource names, counts and words. Pure: no
database, no cluster, no clock (the GPU Operator's names are ``clusters.vocabulary``'s, the
MIG table ``clusters.mig_profiles``')."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from clusters.mig_profiles import profiles_for, slices_per_gpu
from clusters.vocabulary import (
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_RESOURCE_PREFIX,
    SHARED_GPU_RESOURCE,
    SHARED_PRODUCT_SUFFIX,
    mig_config_name,
    time_slicing_config_name,
)

MIG = "mig"
SHARED = "shared"
REPLICAS = (2, 4, 8)


def slice_resource(kind: str, mig_profile: str = "") -> str:
    """The resource the slices are advertised as: ``nvidia.com/mig-1g.10gb`` or
    ``nvidia.com/gpu.shared``."""
    return f"{MIG_RESOURCE_PREFIX}{mig_profile}" if kind == MIG else SHARED_GPU_RESOURCE


def slice_model(kind: str, gpu_model: str) -> str:
    """The product label a converted node carries, which the slice grant is of: the model, or
    for time-sliced GPUs the model with GPU feature discovery's ``-SHARED`` suffix."""
    return gpu_model if kind == MIG else f"{gpu_model}{SHARED_PRODUCT_SUFFIX}"


def per_gpu(kind: str, gpu_model: str, mig_profile: str = "", replicas: int | None = None) -> int:
    """Slices one GPU becomes (0: not a valid layout for the model)."""
    if kind == MIG:
        return slices_per_gpu(gpu_model, mig_profile) or 0
    return replicas if replicas in REPLICAS else 0


def operator_label(kind: str, mig_profile: str = "", replicas: int | None = None) -> str:
    """The value of the GPU Operator's label the layout sets (``all-1g.10gb``,
    ``time-slicing-4``)."""
    if kind == MIG:
        return mig_config_name(mig_profile)
    return time_slicing_config_name(replicas or 0)


def fresh_config(labels: dict[str, str | None]) -> dict[str, str | None]:
    """The labels to patch for a new sharing config: a new MIG config takes the MIG manager's
    state of the last one off, so a ``failed`` left from an earlier config is never read as
    this one's (the manager sets ``pending`` when it starts on the new one)."""
    if MIG_CONFIG_LABEL in labels:
        return {**labels, MIG_CONFIG_STATE_LABEL: None}
    return dict(labels)


@dataclass(frozen=True)
class LayoutShape:
    """A layout's arithmetic: ``gpus`` whole GPUs of ``gpu_model`` become ``slices`` of
    ``resource`` (of the product ``model``)."""

    kind: str
    gpu_model: str
    gpus: int
    mig_profile: str = ""
    replicas: int | None = None

    @property
    def per_gpu(self) -> int:
        return per_gpu(self.kind, self.gpu_model, self.mig_profile, self.replicas)

    @property
    def slices(self) -> int:
        return self.gpus * self.per_gpu

    @property
    def resource(self) -> str:
        return slice_resource(self.kind, self.mig_profile)

    @property
    def model(self) -> str:
        return slice_model(self.kind, self.gpu_model)

    def summary(self, ends_on: datetime.date | None = None) -> str:
        """``2 x NVIDIA-A100-SXM4-80GB → 14 x nvidia.com/mig-1g.10gb until 2026-08-01``."""
        text = f"{self.gpus} × {self.gpu_model} → {self.slices} × {self.resource}"
        if self.kind == SHARED:
            text += f" ({self.replicas} per GPU, no memory isolation)"
        if ends_on is not None:
            text += f" until {ends_on.isoformat()}"
        return text


def profile_choices(gpu_model: str) -> list[tuple[str, str]]:
    """The model's MIG profiles as form choices: ``("1g.10gb", "1g.10gb (7 per GPU)")``."""
    return [
        (profile, f"{profile} ({count} per GPU)")
        for profile, count in profiles_for(gpu_model).items()
    ]
