"""The sharing manager's decision for one node on one pass (devcluster/sharing_manager.step):
pending at once, waiting for GPU pods to go, the delay, success, failure, and no retry of a
failed request."""

from devcluster import gpu_sharing as gs
from devcluster import nodes
from devcluster.sharing_manager import NodeView, step


def view(name=nodes.SHARABLE_NODE, labels=None, annotations=None) -> NodeView:
    spec = {spec.name: spec for spec in nodes.sharing_node_specs()}[name]
    manifest = spec.to_manifest()
    return NodeView(
        name=name,
        labels={**manifest["metadata"]["labels"], **(labels or {})},
        annotations={**manifest["metadata"]["annotations"], **(annotations or {})},
        allocatable=manifest["status"]["allocatable"],
    )


def test_a_node_as_applied_needs_nothing():
    decided = step(view(), waited=None, gpu_pods=False)

    assert (decided.labels, decided.annotations, decided.resources) == (None, None, None)
    assert not decided.waiting


def test_a_new_mig_config_is_pending_at_once_and_waits_for_its_delay():
    node = view(labels={gs.MIG_CONFIG_LABEL: "all-3g.40gb"})

    first = step(node, waited=None, gpu_pods=False)
    later = step(node, waited=1.0, gpu_pods=False)

    assert first.labels == {gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_PENDING}
    assert first.waiting
    assert later.waiting
    assert first.resources is None
    assert later.resources is None


def test_after_the_delay_allocatable_labels_and_state_change():
    node = view(labels={gs.MIG_CONFIG_LABEL: "all-3g.40gb"})

    decided = step(node, waited=2.0, gpu_pods=False)

    assert decided.resources == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "4"}
    assert decided.labels[gs.MIG_CONFIG_STATE_LABEL] == gs.MIG_STATE_SUCCESS
    assert decided.labels["nvidia.com/mig-3g.40gb.count"] == "4"
    assert decided.annotations[gs.MIG_APPLIED_ANNOTATION] == "all-3g.40gb"
    assert decided.annotations[gs.ERROR_ANNOTATION] is None
    assert not decided.waiting


def test_the_delay_annotation_shortens_the_wait():
    node = view(labels={gs.MIG_CONFIG_LABEL: "all-3g.40gb"}, annotations={gs.DELAY_ANNOTATION: "0"})

    assert step(node, waited=0.0, gpu_pods=False).resources is not None


def test_gpu_pods_on_the_node_keep_a_mig_change_pending_and_restart_the_delay():
    node = view(labels={gs.MIG_CONFIG_LABEL: "all-3g.40gb"})

    decided = step(node, waited=60.0, gpu_pods=True)

    assert decided.resources is None
    assert decided.labels == {gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_PENDING}
    assert not decided.waiting  # the caller forgets its start: the delay counts once they go


def test_a_failure_annotation_fails_a_mig_change_and_changes_nothing_else():
    node = view(
        labels={gs.MIG_CONFIG_LABEL: "all-balanced"}, annotations={gs.FAIL_ANNOTATION: "broken"}
    )

    decided = step(node, waited=5.0, gpu_pods=False)

    assert decided.labels == {gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_FAILED}
    assert decided.resources is None
    assert decided.annotations == {
        gs.ERROR_ANNOTATION: "broken",
        gs.FAILED_REQUEST_ANNOTATION: "all-balanced|",
    }


def test_an_unknown_config_fails_with_its_reason_and_is_not_retried():
    node = view(labels={gs.MIG_CONFIG_LABEL: "all-9g.90gb"})

    decided = step(node, waited=5.0, gpu_pods=False)
    failed = view(
        labels={gs.MIG_CONFIG_LABEL: "all-9g.90gb", gs.MIG_CONFIG_STATE_LABEL: "failed"},
        annotations=decided.annotations,
    )

    assert "all-9g.90gb" in decided.annotations[gs.ERROR_ANNOTATION]
    assert step(failed, waited=None, gpu_pods=False) == step(NodeView("x", {}, {}), None, False)


def test_setting_the_applied_config_back_clears_a_failure():
    node = view(
        labels={gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_FAILED},
        annotations={gs.ERROR_ANNOTATION: "broken", gs.FAILED_REQUEST_ANNOTATION: "all-x|"},
    )

    decided = step(node, waited=None, gpu_pods=False)

    assert decided.labels == {gs.MIG_CONFIG_STATE_LABEL: gs.MIG_STATE_SUCCESS}
    assert decided.annotations == {gs.ERROR_ANNOTATION: None, gs.FAILED_REQUEST_ANNOTATION: None}


def test_a_time_slicing_change_has_no_state_label_and_ignores_gpu_pods():
    node = view(labels={gs.DEVICE_PLUGIN_CONFIG_LABEL: "time-slicing-4"})

    first = step(node, waited=None, gpu_pods=True)
    applied = step(node, waited=2.0, gpu_pods=True)

    assert first.labels is None
    assert first.waiting
    assert applied.resources == {"nvidia.com/gpu": None, "nvidia.com/gpu.shared": "8"}
    assert applied.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-SHARED"
    assert applied.labels[gs.GPU_SHARING_STRATEGY_LABEL] == "time-slicing"
    assert applied.annotations[gs.DEVICE_PLUGIN_APPLIED_ANNOTATION] == "time-slicing-4"


def test_removing_the_device_plugin_config_stops_sharing():
    node = view(nodes.SHARED_NODE, labels={gs.DEVICE_PLUGIN_CONFIG_LABEL: ""})

    decided = step(node, waited=2.0, gpu_pods=False)

    assert decided.resources == {"nvidia.com/gpu.shared": None, "nvidia.com/gpu": "2"}
    assert decided.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert decided.labels[gs.GPU_REPLICAS_LABEL] == "1"


def test_a_failed_device_plugin_change_records_the_reason_only():
    node = view(
        labels={gs.DEVICE_PLUGIN_CONFIG_LABEL: "time-slicing-2"},
        annotations={gs.FAIL_ANNOTATION: "plugin crashed"},
    )

    decided = step(node, waited=2.0, gpu_pods=False)

    assert decided.labels is None
    assert decided.resources is None
    assert decided.annotations[gs.ERROR_ANNOTATION] == "plugin crashed"


def test_a_node_without_gpus_is_left_alone():
    assert step(NodeView("cpu-node-0", {"hardware-type": "cpu"}, {}), 9.0, False) == step(
        NodeView("x", {}, {}), None, False
    )
