"""What a layout makes of whole GPUs: resource names, counts, the operator's label and words."""

import datetime

from sharing.layouts import (
    LayoutShape,
    fresh_config,
    operator_label,
    per_gpu,
    profile_choices,
    slice_model,
    slice_resource,
)

A100 = "NVIDIA-A100-SXM4-80GB"


def test_two_a100_as_1g_10gb_are_fourteen_slices():
    shape = LayoutShape(kind="mig", gpu_model=A100, gpus=2, mig_profile="1g.10gb")

    assert (shape.slices, shape.resource, shape.model) == (14, "nvidia.com/mig-1g.10gb", A100)
    assert shape.summary(datetime.date(2026, 8, 1)) == (
        f"2 × {A100} → 14 × nvidia.com/mig-1g.10gb until 2026-08-01"
    )


def test_shared_gpus_are_replicas_of_the_shared_model():
    shape = LayoutShape(kind="shared", gpu_model=A100, gpus=2, replicas=4)

    assert (shape.slices, shape.resource) == (8, "nvidia.com/gpu.shared")
    assert shape.model == slice_model("shared", A100) == f"{A100}-SHARED"
    assert "no memory isolation" in shape.summary()


def test_invalid_layouts_make_no_slices():
    assert per_gpu("mig", A100, "1g.5gb") == 0
    assert per_gpu("shared", A100, replicas=3) == 0


def test_the_operator_labels():
    assert operator_label("mig", "3g.40gb") == "all-3g.40gb"
    assert operator_label("shared", replicas=8) == "time-slicing-8"
    assert slice_resource("mig", "2g.20gb") == "nvidia.com/mig-2g.20gb"


def test_a_new_mig_config_takes_the_last_state_off():
    assert fresh_config({"nvidia.com/mig.config": "all-1g.10gb"}) == {
        "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/mig.config.state": None,
    }
    assert fresh_config({"nvidia.com/device-plugin.config": None}) == {
        "nvidia.com/device-plugin.config": None
    }


def test_profile_choices_say_how_many_per_gpu():
    assert ("1g.10gb", "1g.10gb (7 per GPU)") in profile_choices(A100)
