"""What a node's reading means for a layout, in words: waiting, done, failed."""

from clusters.node_sharing import node_sharing
from sharing.placement import Pick
from sharing.progress import applying_step, picked_text, reverting_step

LABEL = "nvidia.com/gpu.product"
MIG = "nvidia.com/mig-1g.10gb"


def node(allocatable, state=None, name="n1"):
    labels = {LABEL: "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.config": "all-1g.10gb"}
    if state is not None:
        labels["nvidia.com/mig.config.state"] = state
    return node_sharing(
        {
            "metadata": {"name": name, "labels": labels},
            "status": {
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        model_label=LABEL,
    )


def test_waiting_names_the_node_the_state_and_what_it_offers():
    step = applying_step(
        node({"nvidia.com/gpu": "2"}, "pending"), kind="mig", resource=MIG, expected=14
    )

    assert not step.done
    assert not step.failed
    assert "n1" in step.text
    assert "nvidia.com/mig.config.state=pending" in step.text
    assert "2 × nvidia.com/gpu" in step.text
    assert f"14 × {MIG} expected" in step.text


def test_success_needs_the_state_and_the_slices_and_no_whole_gpu():
    assert not applying_step(
        node({MIG: "14"}, "pending"), kind="mig", resource=MIG, expected=14
    ).done
    assert not applying_step(
        node({MIG: "14", "nvidia.com/gpu": "1"}, "success"), kind="mig", resource=MIG, expected=14
    ).done
    assert applying_step(
        node({MIG: "14", "nvidia.com/gpu": "0"}, "success"), kind="mig", resource=MIG, expected=14
    ).done


def test_failed_says_which_node_and_what_the_operator_reported():
    step = applying_step(
        node({"nvidia.com/gpu": "2"}, "failed"), kind="mig", resource=MIG, expected=14
    )

    assert step.failed
    assert step.text.startswith("The MIG manager on n1 reported nvidia.com/mig.config.state=failed")


def test_shared_gpus_need_only_the_allocatable():
    shared = node({"nvidia.com/gpu.shared": "8"})

    assert applying_step(shared, kind="shared", resource="nvidia.com/gpu.shared", expected=8).done


def test_reverting_waits_for_whole_gpus_and_nothing_shared():
    assert not reverting_step(node({MIG: "14"}, "success"), kind="mig", gpus=2).done
    assert reverting_step(node({"nvidia.com/gpu": "2"}, "success"), kind="mig", gpus=2).done


def test_the_slices_of_gpus_beyond_the_ask_are_not_the_team_s():
    text = picked_text(
        Pick(nodes={"big": 8}, asked=2),
        kind="mig",
        label_value="all-1g.10gb",
        resource=MIG,
        per_gpu=7,
    )

    assert text.startswith(
        "Picked big (8 GPUs); cordoned and labelled nvidia.com/mig.config=all-1g.10gb"
    )
    assert "6 GPUs beyond the 2 asked: they become 42 × nvidia.com/mig-1g.10gb too" in text
    assert "not the team's" in text
