"""How much of a GPU one unit of a GPU kind is: the one table of it, pure, no I/O.

Billing prices a grant by it (``billing.pricing``) and the PromQL of held and used GPU-hours
weighs each DCGM series by it (``monitoring.series``), so a slice is the same share of a GPU on
a bill, in a budget and on a chart:

* a whole GPU (``nvidia.com/gpu``, or any other vendor's) is 1;
* a MIG slice is its compute slices over the GPU's: the profile's leading ``<n>g``
  (``nvidia.com/mig-3g.40gb``: 3) over 7 on the A100/H100/H200/B200 class, over 4 on an A30;
  a profile never counts as more than the whole GPU;
* a replica of a shared GPU (``nvidia.com/gpu.shared``, time-slicing or MPS) is 1/replicas,
  the replicas the node's ``nvidia.com/gpu.replicas`` label says each GPU is split into. It
  is what the pod was allotted, not what it used: its utilisation is a share of the whole
  GPU's time, which may be more than 1/replicas while the others are idle.

The per-model MIG table is ``clusters.mig_profiles`` (profiles and compute slices per model
family); ``MIG_SLICES_BY_MODEL`` is its compute slices where they are not 7, which the PromQL
splits MIG series by (``mig_model_classes``), and a profile or model it does not know counts
by its leading ``<n>g`` over 7.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from clusters.mig_profiles import COMPUTE_SLICES, compute_fraction
from clusters.vocabulary import MIG_RESOURCE_PREFIX, SHARED_GPU_RESOURCE, SHARED_PRODUCT_SUFFIX

# Compute slices per GPU: 7 on every MIG-capable GPU (A100, H100, H200, B200 and their
# variants) but those ``clusters.mig_profiles`` says otherwise of (A30s split into 4). A model
# matches a row when its name contains the row's (case-insensitively): the node label's
# "NVIDIA-A30" and DCGM's "NVIDIA A30" alike.
MIG_SLICES = 7
MIG_SLICES_BY_MODEL = tuple(
    (family, slices) for family, slices in sorted(COMPUTE_SLICES.items()) if slices != MIG_SLICES
)
# A MIG profile's compute slices: "3g.40gb" -> 3 (also "1g.10gb+me").
MIG_PROFILE_SLICES = re.compile(r"^(\d+)g\.")


def mig_slices_per_gpu(gpu_model: str) -> int:
    """The compute slices a GPU of the model splits into (7 unless the table says otherwise)."""
    upper = gpu_model.upper()
    return next((count for name, count in MIG_SLICES_BY_MODEL if name in upper), MIG_SLICES)


def mig_profile(gpu_resource: str) -> str | None:
    """``1g.10gb`` for ``nvidia.com/mig-1g.10gb``; None for any other resource."""
    if gpu_resource.startswith(MIG_RESOURCE_PREFIX):
        return gpu_resource[len(MIG_RESOURCE_PREFIX) :]
    return None


def mig_profile_fraction(profile: str, gpu_model: str = "") -> Fraction:
    """The share of a GPU one MIG instance of ``profile`` is: ``clusters.mig_profiles``' for a
    profile of a model it knows, else the profile's slices over the model's (1 when the name
    has no slices)."""
    known = compute_fraction(gpu_model, profile) if gpu_model else None
    if known is not None:
        return known
    match = MIG_PROFILE_SLICES.match(profile)
    if match is None:
        return Fraction(1)
    return min(Fraction(int(match.group(1)), mig_slices_per_gpu(gpu_model)), Fraction(1))


def is_shared(gpu_resource: str) -> bool:
    return gpu_resource == SHARED_GPU_RESOURCE


def base_model(gpu_model: str) -> str:
    """The GPU model a shared GPU's product label names (``NVIDIA-A100-SXM4-80GB-SHARED`` ->
    ``NVIDIA-A100-SXM4-80GB``): what its price is looked up by."""
    if gpu_model.endswith(SHARED_PRODUCT_SUFFIX):
        return gpu_model[: -len(SHARED_PRODUCT_SUFFIX)]
    return gpu_model


@functools.lru_cache(maxsize=1024)
def gpu_share(gpu_resource: str, gpu_model: str = "", replicas: int = 1) -> Fraction:
    """The share of a whole GPU one unit of the resource is: 1 for a GPU, a MIG profile's
    slices over its GPU's, 1/``replicas`` for a replica of a shared GPU (``replicas`` below 1,
    unknown, counts as 1: the whole GPU, never less than was allotted)."""
    profile = mig_profile(gpu_resource)
    if profile is not None:
        return mig_profile_fraction(profile, gpu_model)
    if is_shared(gpu_resource):
        return Fraction(1, max(1, replicas))
    return Fraction(1)


def mig_model_classes() -> list[tuple[str | None, int]]:
    """The table as (model name fragment, slices per GPU), the default last with None: what
    the PromQL splits MIG series by (``modelName`` contains the fragment, or none of them)."""
    return [*MIG_SLICES_BY_MODEL, (None, MIG_SLICES)]
