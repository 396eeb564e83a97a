"""The MIG profiles each GPU model can be partitioned into, and how many slices of a profile one
GPU yields: NVIDIA's MIG user guide, for the models the portal knows. Pure: a table and lookups.

A model is recognised from the node's product label (``NVIDIA-A100-SXM4-80GB``,
``NVIDIA-H100-80GB-HBM3``, ``NVIDIA-A30``) by its family and memory. A sharing layout's MIG
profile must be one of its model's (``sharing``), and ``slices_per_gpu`` says how many slices
of that profile the GPU Operator's ``all-<profile>`` config makes of each GPU.
"""

from __future__ import annotations

import re
from fractions import Fraction
from types import MappingProxyType

# Family and memory -> profile -> slices of that profile per GPU (``all-<profile>``).
MIG_PROFILES = MappingProxyType(
    {
        "A100-80GB": MappingProxyType(
            {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
        ),
        "A100-40GB": MappingProxyType(
            {"1g.5gb": 7, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}
        ),
        "H100-80GB": MappingProxyType(
            {
                "1g.10gb": 7,
                "1g.20gb": 4,
                "2g.20gb": 3,
                "3g.40gb": 2,
                "4g.40gb": 1,
                "7g.80gb": 1,
            }
        ),
        "A30-24GB": MappingProxyType({"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1}),
    }
)
# The compute slices a whole GPU of the family has: a profile ``<n>g.<memory>`` holds n of them.
COMPUTE_SLICES = MappingProxyType({"A100": 7, "H100": 7, "A30": 4})

_MEMORY = re.compile(r"(\d+)GB")
_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb$")


def mig_family(gpu_model: str) -> str | None:
    """The table's key for a node's product label (``NVIDIA-A100-SXM4-80GB`` -> ``A100-80GB``),
    or None for a model without MIG (or one the table does not know)."""
    upper = gpu_model.upper()
    memory = _MEMORY.search(upper)
    gigabytes = int(memory.group(1)) if memory else None
    if "A100" in upper:
        return "A100-80GB" if gigabytes == 80 else "A100-40GB"
    if "H100" in upper and gigabytes in (None, 80):
        return "H100-80GB"
    if "A30" in upper and gigabytes in (None, 24):
        return "A30-24GB"
    return None


def profiles_for(gpu_model: str) -> dict[str, int]:
    """The MIG profiles of the model, each with the slices one GPU yields ({}: no MIG)."""
    family = mig_family(gpu_model)
    return dict(MIG_PROFILES[family]) if family else {}


def slices_per_gpu(gpu_model: str, profile: str) -> int | None:
    """How many ``profile`` slices one GPU of the model becomes (None: not a profile of it)."""
    return profiles_for(gpu_model).get(profile)


def compute_fraction(gpu_model: str, profile: str) -> Fraction | None:
    """The share of the GPU's compute one slice holds (``1g.10gb`` of an A100: 1/7), or None for
    a profile the model does not have."""
    family = mig_family(gpu_model)
    match = _PROFILE.match(profile)
    if family is None or match is None or profile not in MIG_PROFILES[family]:
        return None
    return Fraction(int(match.group(1)), COMPUTE_SLICES[family.split("-")[0]])
