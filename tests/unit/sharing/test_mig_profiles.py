"""The MIG profile table: which profiles a node's GPU model has and how many slices each makes."""

from fractions import Fraction

import pytest

from clusters.mig_profiles import compute_fraction, mig_family, profiles_for, slices_per_gpu


@pytest.mark.parametrize(
    ("product", "family"),
    [
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA-A100-80GB-PCIe", "A100-80GB"),
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA-A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("NVIDIA-A30", "A30-24GB"),
        ("NVIDIA-L40S", None),
        ("NVIDIA-H100-NVL-94GB", None),
        ("", None),
    ],
)
def test_a_product_label_names_its_family(product, family):
    assert mig_family(product) == family


@pytest.mark.parametrize(
    ("product", "profile", "slices"),
    [
        ("NVIDIA-A100-SXM4-80GB", "1g.10gb", 7),
        ("NVIDIA-A100-SXM4-80GB", "2g.20gb", 3),
        ("NVIDIA-A100-SXM4-80GB", "3g.40gb", 2),
        ("NVIDIA-A100-SXM4-80GB", "7g.80gb", 1),
        ("NVIDIA-A100-SXM4-40GB", "1g.5gb", 7),
        ("NVIDIA-A100-SXM4-40GB", "4g.20gb", 1),
        ("NVIDIA-H100-80GB-HBM3", "1g.20gb", 4),
        ("NVIDIA-A30", "1g.6gb", 4),
        ("NVIDIA-A30", "2g.12gb", 2),
    ],
)
def test_one_gpu_yields_the_profile_s_slices(product, profile, slices):
    assert slices_per_gpu(product, profile) == slices


def test_a_profile_of_another_model_is_none():
    assert slices_per_gpu("NVIDIA-A100-SXM4-80GB", "1g.5gb") is None
    assert slices_per_gpu("NVIDIA-L40S", "1g.10gb") is None
    assert profiles_for("NVIDIA-L40S") == {}


def test_every_profile_fits_the_gpu_s_compute():
    for product in ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"):
        for profile, slices in profiles_for(product).items():
            assert compute_fraction(product, profile) * slices <= 1
    assert compute_fraction("NVIDIA-A30", "2g.12gb") == Fraction(1, 2)
    assert compute_fraction("NVIDIA-A100-SXM4-80GB", "3g.40gb") == Fraction(3, 7)
