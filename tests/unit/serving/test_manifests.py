"""A service as the objects the cluster runs: a Deployment per live revision placed on GPU nodes
with a GPU-free sidecar, one Service, and with the Gateway API a weighted HTTPRoute over
per-revision Services; the same state always gives the same objects."""

import pytest

from clusters.vocabulary import DESIRED_HASH_ANNOTATION, REVISION_LABEL, SERVICE_ID_LABEL
from serving import manifests
from serving.manifests import RevisionSpec, ServiceSpec
from serving.specs import Probe, ProbeKind, RevisionRequest
from workloads.manifests import Placement
from workloads.specs import ContainerRequest

PLACEMENT = Placement()


def revision(
    number=1, *, replicas=2, weight=100, role="stable", sidecar=True, ready=True, **kwargs
):
    request = RevisionRequest(
        main=ContainerRequest(
            image=kwargs.pop("image", f"registry.example.com/vision/llm:{number}"),
            env=(("MODEL", "llama"),),
        ),
        gpus=kwargs.pop("gpus", 1),
        port=kwargs.pop("port", 8000),
        sidecar=ContainerRequest(
            image="registry.example.com/vision/pre:1",
            env=(("NVIDIA_VISIBLE_DEVICES", "all"), ("MODE", "tokenize")),
        )
        if sidecar
        else None,
        **kwargs,
    )
    return RevisionSpec(
        number=number, request=request, replicas=replicas, weight=weight, role=role, ready=ready
    )


def spec(*revisions, routing="gateway-api", **kwargs) -> ServiceSpec:
    return ServiceSpec(
        service_id=7,
        name="llm",
        namespace="vision",
        revisions=revisions or (revision(),),
        routing=routing,
        placement=PLACEMENT,
        **kwargs,
    )


def by_kind(objects, kind) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def test_a_revision_is_a_deployment_on_gpu_nodes_with_a_gpu_free_sidecar():
    (deployment,) = by_kind(manifests.service_objects(spec()), "Deployment").values()
    pod = deployment["spec"]["template"]["spec"]
    server, sidecar = pod["containers"]

    assert deployment["metadata"]["name"] == "llm-r1"
    assert deployment["spec"]["replicas"] == 2
    assert server["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "nvidia.com/gpu" not in str(sidecar.get("resources", {}))
    assert sidecar["env"][-1] == {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} not in sidecar["env"]
    expressions = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"]
    assert expressions == [{"key": "hardware-type", "operator": "In", "values": ["gpu"]}]
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_the_gpu_model_joins_the_affinity():
    (deployment,) = by_kind(
        manifests.service_objects(spec(revision(gpu_model="NVIDIA-H100-80GB-HBM3"))), "Deployment"
    ).values()
    terms = deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]

    assert terms[0]["matchExpressions"][-1] == {
        "key": "nvidia.com/gpu.product",
        "operator": "In",
        "values": ["NVIDIA-H100-80GB-HBM3"],
    }


@pytest.mark.parametrize(
    ("probe", "check"),
    [
        (Probe(ProbeKind.HTTP, "/healthz"), {"httpGet": {"path": "/healthz", "port": "http"}}),
        (Probe(ProbeKind.TCP, ""), {"tcpSocket": {"port": "http"}}),
    ],
)
def test_the_readiness_probe_checks_the_named_port(probe, check):
    (deployment,) = by_kind(
        manifests.service_objects(spec(revision(probe=probe))), "Deployment"
    ).values()
    server = deployment["spec"]["template"]["spec"]["containers"][0]

    assert server["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert {k: v for k, v in server["readinessProbe"].items() if k in check} == check


def test_a_canary_at_ten_percent_gives_route_weights_90_10_over_per_revision_services():
    objects = manifests.service_objects(
        spec(revision(1, weight=90), revision(2, replicas=1, weight=10, role="candidate"))
    )
    (route,) = by_kind(objects, "HTTPRoute").values()

    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]] == [
        ("llm-r1", 90),
        ("llm-r2", 10),
    ]
    services = by_kind(objects, "Service")
    assert set(services) == {"llm", "llm-r1", "llm-r2"}
    assert services["llm-r2"]["spec"]["selector"][REVISION_LABEL] == "2"
    assert REVISION_LABEL not in services["llm"]["spec"]["selector"]
    assert services["llm"]["spec"]["selector"][SERVICE_ID_LABEL] == "7"


def route_weights(*revisions) -> list[tuple[str, int]]:
    (route,) = by_kind(manifests.service_objects(spec(*revisions)), "HTTPRoute").values()
    return [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]]


def test_a_canary_takes_its_share_once_a_replica_of_it_is_ready():
    stable = revision(1, weight=80)

    waiting = revision(2, replicas=1, weight=20, role="candidate", ready=False)
    assert route_weights(stable, waiting) == [("llm-r1", 80), ("llm-r2", 0)]

    ready = revision(2, replicas=1, weight=20, role="candidate")
    assert route_weights(stable, ready) == [("llm-r1", 80), ("llm-r2", 20)]


def test_a_revision_without_a_ready_replica_gives_its_share_to_one_that_has_one():
    down = revision(1, weight=80, ready=False)
    canary = revision(2, replicas=1, weight=20, role="candidate")

    assert route_weights(down, canary) == [("llm-r1", 0), ("llm-r2", 20)]


def test_with_no_revision_ready_the_route_keeps_the_split_asked_for():
    assert route_weights(
        revision(1, weight=80, ready=False),
        revision(2, replicas=1, weight=20, role="candidate", ready=False),
    ) == [("llm-r1", 80), ("llm-r2", 20)]


def test_without_the_gateway_api_one_service_and_replica_counts_carry_the_split():
    objects = manifests.service_objects(
        spec(
            revision(1, replicas=9, weight=90),
            revision(2, replicas=1, weight=10, role="candidate"),
            routing="replicas",
        )
    )

    assert set(by_kind(objects, "Service")) == {"llm"}
    assert by_kind(objects, "HTTPRoute") == {}
    replicas = {n: d["spec"]["replicas"] for n, d in by_kind(objects, "Deployment").items()}
    assert replicas == {"llm-r1": 9, "llm-r2": 1}


def test_a_stopped_service_keeps_its_objects_at_zero_replicas():
    objects = manifests.service_objects(spec(stopped=True))

    assert [d["spec"]["replicas"] for d in by_kind(objects, "Deployment").values()] == [0]


def test_the_route_attaches_to_the_gateway_when_one_is_named():
    (route,) = by_kind(
        manifests.service_objects(spec(gateway="infra/public")), "HTTPRoute"
    ).values()

    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "public",
            "namespace": "infra",
        }
    ]


def test_every_object_carries_the_ownership_labels_and_its_hash():
    for obj in manifests.service_objects(spec()):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "gpu-portal"
        assert labels["gpuportal.io/team"] == "vision"
        assert labels[SERVICE_ID_LABEL] == "7"
        assert DESIRED_HASH_ANNOTATION in obj["metadata"]["annotations"]


def test_the_same_state_gives_the_same_objects():
    assert manifests.service_objects(spec()) == manifests.service_objects(spec())


def test_a_deleted_service_wants_nothing():
    assert (
        manifests.service_objects(
            ServiceSpec(
                service_id=7, name="llm", namespace="vision", revisions=(), routing="replicas"
            )
        )
        == []
    )


def test_in_kueue_mode_a_revision_and_its_pods_wait_in_the_guaranteed_queue():
    (deployment,) = by_kind(
        manifests.service_objects(spec(queue="guaranteed")), "Deployment"
    ).values()

    queued = {
        "kueue.x-k8s.io/queue-name": "guaranteed",
        "kueue.x-k8s.io/priority-class": "gpu-portal-guaranteed",
    }
    assert queued.items() <= deployment["metadata"]["labels"].items()
    assert queued.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert not queued.keys() & deployment["spec"]["selector"]["matchLabels"].keys()


def test_without_kueue_a_revision_carries_no_queue_labels():
    (deployment,) = by_kind(manifests.service_objects(spec()), "Deployment").values()

    assert "kueue.x-k8s.io/queue-name" not in str(deployment)


def test_the_route_answers_only_for_the_services_own_hostname_in_its_teams_domain():
    (route,) = by_kind(
        manifests.service_objects(spec(apps_domain="apps.acme.io")), "HTTPRoute"
    ).values()

    assert route["spec"]["hostnames"] == ["llm.vision.apps.acme.io"]
