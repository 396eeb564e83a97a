"""GPU capacity from the Node JSON, and the portal's words for the API server's refusals."""

import json

import pytest
from kubernetes.client.rest import ApiException

from clusters import kube
from clusters.inventory import gpu_inventory, gpu_model_inventory, node_usable

MODEL_LABEL = "nvidia.com/gpu.product"


def node(name, gpus=8, *, ready=True, model="NVIDIA-A100-SXM4-80GB", cordoned=False, **extra):
    return {
        "metadata": {"name": name, "labels": {MODEL_LABEL: model} if model else {}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus), **extra},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
        },
    }


def test_allocatable_gpus_add_up_over_ready_nodes():
    kinds = gpu_inventory([node("a"), node("b", 4)], model_label=MODEL_LABEL)

    assert kinds["nvidia.com/gpu"].allocatable == 12
    assert kinds["nvidia.com/gpu"].gpu_model == "NVIDIA-A100-SXM4-80GB"


@pytest.mark.parametrize(
    "unusable", [node("b", ready=False), node("b", cordoned=True)], ids=["not-ready", "cordoned"]
)
def test_nodes_that_cannot_take_pods_do_not_count(unusable):
    kinds = gpu_inventory([node("a"), unusable], model_label=MODEL_LABEL)

    assert kinds["nvidia.com/gpu"].allocatable == 8
    assert not node_usable(unusable)


def test_a_node_without_conditions_is_not_ready():
    assert not node_usable({"metadata": {"name": "new"}, "status": {}})


def test_each_gpu_resource_name_is_its_own_kind_and_cpu_or_memory_are_not_gpus():
    kinds = gpu_inventory(
        [node("a", 0, **{"nvidia.com/mig-1g.10gb": "7"}), node("b", 8)], model_label=MODEL_LABEL
    )

    assert {name: kind.allocatable for name, kind in kinds.items()} == {
        "nvidia.com/mig-1g.10gb": 7,
        "nvidia.com/gpu": 8,
    }


def test_known_resource_names_count_even_without_a_gpu_prefix():
    kinds = gpu_inventory(
        [node("a", **{"example.com/accelerator": "2"})],
        model_label=MODEL_LABEL,
        known_resources=["example.com/accelerator"],
    )

    assert kinds["example.com/accelerator"].allocatable == 2


def test_models_of_a_mixed_pool_are_listed():
    kinds = gpu_inventory(
        [node("a", model="NVIDIA-H100-80GB-HBM3"), node("b"), node("c", model=None)],
        model_label=MODEL_LABEL,
    )

    assert kinds["nvidia.com/gpu"].gpu_model == "NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3"


def figures(models):
    return {key: (m.allocatable, m.nodes, m.max_per_node) for key, m in models.items()}


def test_each_gpu_model_has_its_gpus_usable_nodes_and_most_per_node():
    models = gpu_model_inventory(
        [
            node("a", 8),
            node("b", 4),
            node("h", 8, model="NVIDIA-H100-80GB-HBM3"),
            node("unlabelled", 8, model=None),
        ],
        model_label=MODEL_LABEL,
    )

    assert figures(models) == {
        ("nvidia.com/gpu", "NVIDIA-A100-SXM4-80GB"): (12, 2, 8),
        ("nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3"): (8, 1, 8),
    }


@pytest.mark.parametrize(
    "down", [node("h", ready=False), node("h", cordoned=True)], ids=["not-ready", "cordoned"]
)
def test_a_model_whose_nodes_are_all_down_stays_at_zero(down):
    down["metadata"]["labels"][MODEL_LABEL] = "NVIDIA-H100-80GB-HBM3"

    models = gpu_model_inventory([node("a"), down], model_label=MODEL_LABEL)

    assert figures(models)[("nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3")] == (0, 0, 0)


def test_a_model_no_node_carries_is_absent():
    models = gpu_model_inventory([node("a")], model_label=MODEL_LABEL)

    assert list(models) == [("nvidia.com/gpu", "NVIDIA-A100-SXM4-80GB")]


# --- errors the API server cannot be made to give on cue ----------------------------------------
# A healthy API server shared with other test sessions does not throttle (429) or go unavailable
# (503) when asked, and a version too old to resume from (410) needs its etcd compacted. These
# stand-in answers have the shape of the real ones. Every other refusal is the devcluster's own:
# tests/integration/test_kube_refusals.py and test_kube_errors.py.


class FakeResponse:
    def __init__(self, status, message, reason="Reason", details=None):
        self.status, self.reason = status, reason
        self.data = json.dumps(
            {"kind": "Status", "message": message, "reason": reason, "details": details or {}}
        )

    def getheaders(self):
        return {}


def translate(status, message="nope", details=None, reason="Reason"):
    client = kube.KubeClient(api=None, cluster_name="gpu-east", field_manager="gpu-portal")
    error = ApiException(http_resp=FakeResponse(status, message, reason, details))
    return client._translate(error, method="PATCH", what="ResourceQuota q in namespace vision")


@pytest.mark.parametrize(
    ("status", "kind"), [(429, kube.Throttled), (503, kube.ServerError)], ids=["429", "503"]
)
def test_throttling_and_an_unavailable_api_server_are_worth_retrying(status, kind):
    error = translate(status, reason="TooManyRequests" if status == 429 else "ServiceUnavailable")

    assert isinstance(error, kind)
    assert error.transient is True
    assert error.status == status


def test_a_version_too_old_asks_for_a_new_list_with_the_status_reason_and_details():
    details = {"name": "q", "kind": "resourcequotas"}

    error = translate(410, "too old resource version: 1 (50)", details=details, reason="Expired")

    assert type(error) is kube.ResourceVersionExpired
    assert (error.status, error.reason, error.details) == (410, "Expired", details)
    assert "Listing again" in str(error)


def test_a_webhook_that_does_not_answer_is_worth_retrying_and_named():
    # As kube-apiserver v1.36.3 answers an apply while Kueue is stopped (devcluster).
    error = translate(
        500,
        'Internal error occurred: failed calling webhook "vclusterqueue.kb.io": failed to call '
        'webhook: Post "https://127.0.0.1:29443/validate-kueue-x-k8s-io-v1beta2-clusterqueue?'
        'timeout=10s": dial tcp 127.0.0.1:29443: connect: connection refused',
        reason="InternalError",
    )

    assert isinstance(error, kube.WebhookUnavailable)
    assert error.transient
    assert error.webhook == "vclusterqueue.kb.io"
    assert "Kueue" in str(error)


def test_kind_paths():
    assert kube.KINDS["Namespace"].path(name="vision") == "/api/v1/namespaces/vision"
    assert kube.KINDS["RoleBinding"].path(namespace="vision", name="gpu-portal-edit") == (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/vision/rolebindings/gpu-portal-edit"
    )
    assert kube.KINDS["ResourceQuota"].path(namespace="vision") == (
        "/api/v1/namespaces/vision/resourcequotas"
    )
    assert kube.KINDS["ClusterQueue"].path(name="gpu-portal-vision") == (
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/gpu-portal-vision"
    )
    assert kube.KINDS["LocalQueue"].path(namespace="vision", name="guaranteed") == (
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/vision/localqueues/guaranteed"
    )
