"""Inference services on the devcluster, through the API, with the real Celery worker (acting
with deploy/rbac.yaml's least-privilege identity) and the watcher process: the objects each
action leaves on the cluster, and the state the watcher brings back.

kwok runs no containers: its pods become Ready without any probe being made (its pod-ready stage
needs nothing of the readiness probe), and no request is ever served. What is tested is what is
real here: the Deployments, Services and HTTPRoutes, where their pods land, and the states.
"""

import signal

import pytest
from django.utils import timezone

from serving import tasks, tracker
from serving.models import InferenceService
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import gpu_nodes, set_gpu_quota
from tests.integration.serving.cluster import (
    act,
    deploy,
    deployments,
    revision,
    route,
    selector,
    services_of,
    wait_for_deployments,
    wait_for_ready,
    wait_for_weights,
)
from tests.integration.serving.cluster import (
    api as api_as,
)

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

SIDECAR = {
    "image": "registry.example.com/vision/tokenizer:1.0",
    "cpu_cores": "0.5",
    "memory_gib": "0.5",
    "env": [{"name": "MODE", "value": "tokenize"}],
}


@pytest.fixture(autouse=True)
def _services(running_services, gateway_api):
    """The worker applies the services' objects and the watcher brings their state back."""


def test_a_two_replica_service_with_a_sidecar_lands_on_gpu_nodes_with_the_sidecar_gpu_free(
    make_gpu_team, gpu_cluster, core, apps, custom
):
    gpu = make_gpu_team(gpus=2)

    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=2, sidecar=SIDECAR)

    stable = wait_for_ready(service, 1, 2)
    pods = core.list_namespaced_pod(gpu.namespace, label_selector=selector(service)).items
    assert len(pods) == 2
    assert {p.spec.node_name for p in pods} <= gpu_nodes(core)
    assert sorted(stable.pods) == sorted(p.metadata.name for p in pods)
    for pod in pods:
        server, sidecar = pod.spec.containers
        assert server.resources.limits["nvidia.com/gpu"] == "1"
        assert "nvidia.com/gpu" not in (sidecar.resources.limits or {})
        assert "nvidia.com/gpu" not in (sidecar.resources.requests or {})
        env = {e.name: e.value for e in sidecar.env}
        assert env == {"MODE": "tokenize", "NVIDIA_VISIBLE_DEVICES": "void"}
        assert server.readiness_probe.http_get.path == "/healthz"
        assert any(t.key == "nvidia.com/gpu" for t in pod.spec.tolerations)
    # One Service in front of the pods, and (the Gateway API being served) a route to r1.
    assert services_of(core, service)["llm"].spec.selector["gpuportal.io/service-id"] == str(
        service.pk
    )
    wait_for_weights(custom, service, [("llm-r1", 100)])
    (deployment,) = deployments(apps, service).values()
    managers = {m.manager for m in deployment.metadata.managed_fields if m.operation == "Apply"}
    assert managers == {"gpu-portal"}  # server-side apply, the portal's field manager
    service.refresh_from_db()
    assert (service.routing, service.status) == ("gateway-api", "in_sync")
    assert gpu_cluster.__class__.objects.get(pk=gpu_cluster.pk).gateway_api is True


def test_a_canary_at_ten_percent_gives_route_weights_90_10_then_promote_and_roll_back(
    make_gpu_team, gpu_cluster, apps, custom
):
    gpu = make_gpu_team(gpus=3)
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=1)
    wait_for_ready(service, 1, 1)

    act(gpu.member, service, "canary", {"image": "registry.example.com/v/llm:2.2", "weight": 10})

    wait_for_weights(custom, service, [("llm-r1", 90), ("llm-r2", 10)])
    wait_for_ready(service, 2, 1)
    wait_for_deployments(apps, service, {"llm-r1": 1, "llm-r2": 1})

    act(gpu.member, service, "traffic", {"split": {"1": 75, "2": 25}})
    wait_for_weights(custom, service, [("llm-r1", 75), ("llm-r2", 25)])

    act(gpu.member, service, "promote")
    wait_for_weights(custom, service, [("llm-r2", 100)])
    wait_for_deployments(apps, service, {"llm-r2": 1})

    act(gpu.member, service, "canary", {"image": "registry.example.com/v/llm:2.3", "weight": 10})
    wait_for_weights(custom, service, [("llm-r2", 90), ("llm-r3", 10)])
    act(gpu.member, service, "rollback")
    wait_for_weights(custom, service, [("llm-r2", 100)])
    wait_for_deployments(apps, service, {"llm-r2": 1})
    assert revision(service, 3).role == "retired"


def test_a_rollout_takes_over_once_its_replicas_are_ready(make_gpu_team, gpu_cluster, custom, apps):
    gpu = make_gpu_team(gpus=2)
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=1)
    wait_for_ready(service, 1, 1)

    act(gpu.member, service, "update", {"image": "registry.example.com/v/llm:3.0"})

    # The watcher sees r2 ready and asks for the rollout to finish: r1 goes, r2 takes it all.
    wait_for_weights(custom, service, [("llm-r2", 100)])
    wait_for_deployments(apps, service, {"llm-r2": 1})
    service.refresh_from_db()
    assert service.rollout == "none"
    assert (revision(service, 1).role, revision(service, 2).role) == ("retired", "stable")


def test_an_ab_test_runs_two_named_variants_side_by_side(make_gpu_team, gpu_cluster, custom):
    gpu = make_gpu_team(gpus=2)
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=1)
    wait_for_ready(service, 1, 1)

    act(
        gpu.member,
        service,
        "ab-test",
        {
            "image": "registry.example.com/v/llm:2.1-int8",
            "variants": [{"name": "fp16", "weight": 50}, {"name": "int8", "weight": 50}],
        },
    )

    wait_for_weights(custom, service, [("llm-r1", 50), ("llm-r2", 50)])
    wait_for_ready(service, 2, 1)
    assert (revision(service, 1).variant, revision(service, 2).variant) == ("fp16", "int8")
    act(gpu.member, service, "promote", {"variant": "int8"})
    wait_for_weights(custom, service, [("llm-r2", 100)])


def test_a_scale_up_beyond_quota_is_refused_and_a_replica_the_cluster_refuses_says_why(
    make_gpu_team, gpu_cluster, core, apps
):
    gpu = make_gpu_team(gpus=2)
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=2)
    wait_for_ready(service, 1, 2)

    refused = act(gpu.member, service, "scale", {"replicas": 3}, status=400)

    assert (
        "scaling r1 from 2 to 3 replicas × 1 GPU asks for 1, exceeding it by 1"
        in (refused.data["replicas"][0])
    )
    wait_for_deployments(apps, service, {"llm-r1": 2})
    # An admin shrinks the namespace's quota by hand; a replica lost then cannot come back,
    # and the revision says why.
    set_gpu_quota(core, gpu.namespace, 1)
    pod = core.list_namespaced_pod(gpu.namespace, label_selector=selector(service)).items[0]
    core.delete_namespaced_pod(pod.metadata.name, gpu.namespace)

    waiting = wait_for(
        lambda: (row := revision(service, 1)).reason == "ExceededQuota" and row,
        timeout=90,
        what="the revision to say the quota refused a replica",
    )
    assert waiting.message.startswith("1 of 2 replicas ready. The team's GPU quota is used up")
    assert "exceeded quota" in waiting.message


def test_without_the_gateway_api_traffic_is_approximated_by_replica_counts(
    make_gpu_team, gpu_cluster, core, apps, custom, devcluster, client_as
):
    gpu = make_gpu_team(gpus=4)
    with devcluster.gateway_api_removed():
        service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=2)
        wait_for_ready(service, 1, 2)

        act(
            gpu.member, service, "canary", {"image": "registry.example.com/v/llm:2.2", "weight": 10}
        )

        wait_for_deployments(apps, service, {"llm-r1": 2, "llm-r2": 1})
        wait_for_ready(service, 2, 1)
        assert set(services_of(core, service)) == {"llm"}  # one Service, no per-revision ones
        service.refresh_from_db()
        assert service.routing == "replicas"
        traffic = act(gpu.member, service, "traffic", {"split": {"1": 50, "2": 50}}).data
        assert [(t["replicas"], t["share"]) for t in traffic["traffic"]] == [(2, 50.0), (2, 50.0)]
        wait_for_deployments(apps, service, {"llm-r1": 2, "llm-r2": 2})
        page = client_as(gpu.member).get(f"/services/{service.pk}/").content.decode()
        assert "approximated by replica counts behind one Service" in page
        act(gpu.member, service, "promote")
        wait_for_deployments(apps, service, {"llm-r2": 2})


def test_delete_leaves_no_object_behind(make_gpu_team, gpu_cluster, core, apps, custom):
    gpu = make_gpu_team(gpus=2)
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=1, sidecar=SIDECAR)
    wait_for_ready(service, 1, 1)
    act(gpu.member, service, "canary", {"image": "registry.example.com/v/llm:2.2", "weight": 10})
    wait_for_ready(service, 2, 1)

    response = api_as(gpu.member).delete(f"/api/v1/services/{service.pk}/")

    assert response.status_code == 202
    try:
        wait_for(
            lambda: InferenceService.objects.get(pk=service.pk).state == "deleted",
            timeout=90,
            what="the service to be marked deleted",
        )
    except pytest.fail.Exception:
        fresh = InferenceService.objects.get(pk=service.pk)
        pytest.fail(f"still {fresh.state}: {fresh.status} {fresh.last_error}")
    namespace, labels = gpu.namespace, selector(service)
    assert apps.list_namespaced_deployment(namespace, label_selector=labels).items == []
    assert apps.list_namespaced_replica_set(namespace, label_selector=labels).items == []
    assert core.list_namespaced_pod(namespace, label_selector=labels).items == []
    assert core.list_namespaced_service(namespace, label_selector=labels).items == []
    assert route(custom, service) is None
    assert InferenceService.objects.get(pk=service.pk).deleted_at is not None


def test_hand_edits_of_the_portals_fields_are_repaired(make_gpu_team, gpu_cluster, core, apps):
    gpu = make_gpu_team(gpus=2)
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=1)
    wait_for_ready(service, 1, 1)
    apps.patch_namespaced_deployment("llm-r1", gpu.namespace, {"spec": {"replicas": 2}})
    core.delete_namespaced_service("llm", gpu.namespace)

    tasks.reconcile_services.delay()  # the periodic sweep, as beat sends it

    wait_for_deployments(apps, service, {"llm-r1": 1})
    wait_for(lambda: "llm" in services_of(core, service), timeout=60, what="the Service back")


def test_what_the_watcher_missed_the_resync_records(
    make_gpu_team, gpu_cluster, apps, watcher_process
):
    gpu = make_gpu_team(gpus=2)
    service = deploy(gpu.member, gpu.team, gpu_cluster, replicas=1)
    wait_for_ready(service, 1, 1)

    watcher_process.send_signal(signal.SIGSTOP)  # the watcher sees nothing meanwhile
    try:
        act(gpu.member, service, "scale", {"replicas": 2})
        wait_for(
            lambda: (
                apps.read_namespaced_deployment("llm-r1", gpu.namespace).status.ready_replicas == 2
            ),
            timeout=60,
            what="both replicas ready on the cluster",
        )
        assert revision(service, 1).ready_replicas == 1  # not seen by the portal yet
        result = tracker.resync_cluster(gpu_cluster)
        # Read while the watcher is still stopped: once it runs again it may first apply the
        # events it had buffered (one replica ready of two) before the latest one.
        row = revision(service, 1)
    finally:
        watcher_process.send_signal(signal.SIGCONT)

    assert result["changed"] >= 1
    assert (row.ready_replicas, row.desired_replicas) == (2, 2)
    assert row.observed_at <= timezone.now()
