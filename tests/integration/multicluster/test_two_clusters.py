"""One team with grants on two clusters, each a real control plane with its own Prometheus: the
devcluster (``alpha``: A100 and H100 nodes) and a second devcluster beside it (``beta``: two L40S
nodes of 4 GPUs). Quota, jobs, capacity, metrics and Kueue queues of one cluster never show on the
other."""

import pytest
from django.conf import settings

from clusters.models import QuotaMode
from clusters.vocabulary import LOCAL_QUEUES, cluster_queue_name, resource_flavor_name
from gpujobs.models import GpuJob
from tenants import queueing
from tenants.models import ClusterState, TeamCluster
from tests.integration.conftest import wait_for
from tests.integration.gpujobs.fixtures import submit, wait_for_job, wait_for_quota
from tests.integration.kube import delete_namespace, read_or_none
from tests.integration.kueue_portal import KueueObjects
from tests.integration.monitoring.pages import chart_values
from tests.integration.monitoring.workloads import UTILISATION, eventually
from tests.integration.multicluster.two_clusters import gpu_quota, member_of, request_quota

pytestmark = [pytest.mark.devcluster]

A100, H100, L40S = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S"
PRODUCT = "nvidia.com/gpu.product"


def submitted(response) -> GpuJob:
    assert response.status_code == 201, response.content
    return GpuJob.objects.get(pk=response.json()["id"])


def running_with_pods(job: GpuJob) -> GpuJob:
    """The job once the watcher saw it running and recorded its pod."""
    return wait_for_job(
        job.pk,
        lambda j: j.state == GpuJob.State.RUNNING and j.pods,
        what=f"{job.name} running with its pod recorded",
    )


def pod_models(core_api, namespace: str) -> dict[str, str]:
    """The namespace's pods on this cluster, each with the GPU model of the node it runs on."""
    return {
        pod.metadata.name: core_api.read_node(pod.spec.node_name).metadata.labels.get(PRODUCT)
        for pod in core_api.list_namespaced_pod(namespace).items
        if pod.spec.node_name
    }


def test_a_grant_reaches_the_cluster_it_was_approved_on_and_no_other(make_team, clusters, grant):
    team = make_team()
    alpha, beta = clusters.core_of(clusters.alpha), clusters.core_of(clusters.beta)

    grant(team, clusters.alpha, 3)

    wait_for_quota(alpha, team.slug, 3)
    assert read_or_none(beta.read_namespace, team.slug) is None
    assert not TeamCluster.objects.filter(team=team, cluster=clusters.beta).exists()

    grant(team, clusters.beta, 2)

    wait_for_quota(beta, team.slug, 2)
    assert gpu_quota(alpha, team.slug) == "3"
    assert read_or_none(beta.read_namespace, team.slug) is not None


def test_the_review_queue_shows_each_clusters_own_capacity(make_team, clusters, admin_user, api):
    team = make_team()
    on_alpha = request_quota(team, clusters.alpha, 10)
    on_beta = request_quota(team, clusters.beta, 10)

    body = api.as_user(admin_user).get("/api/v1/quota-requests/review-queue/").json()

    items = {item["id"]: item for item in body["results"]}
    beta = items[on_beta.pk]
    assert beta["capacity"]["capacity"] == 8
    assert beta["capacity"]["free_after"] == -2  # 10 GPUs do not fit beta's 8
    assert [(m["gpu_model"], m["capacity"], m["nodes"], m["max_per_node"])
            for m in beta["gpu_models"]] == [(L40S, 8, 2, 4)]  # fmt: skip
    alpha = items[on_alpha.pk]
    models = {m["gpu_model"]: m["capacity"] for m in alpha["gpu_models"]}
    # Other test sessions may add nodes to the shared devcluster: at least its own 48 GPUs.
    assert models[A100] >= 32
    assert models[H100] >= 16
    assert L40S not in models
    assert alpha["capacity"]["capacity"] >= 48
    assert alpha["capacity"]["free_after"] >= 38


def test_jobs_run_on_the_cluster_they_were_submitted_to_and_their_metrics_stay_there(
    make_team,
    clusters,
    grant,
    running_services,
    api,
    client_as,
    devcluster,
    devcluster_second,
    settings,
):
    settings.MONITORING_CACHE_SECONDS = 0  # every read asks Prometheus afresh
    team = make_team()
    grant(team, clusters.alpha, 1)
    grant(team, clusters.beta, 1)
    member = member_of(team, "member")

    jobs = {
        cluster.name: submitted(
            submit(member, team, cluster, name=f"on-{cluster.name}", gpus=1,
                   annotations={UTILISATION: utilisation})
        )
        for cluster, utilisation in ((clusters.alpha, "37"), (clusters.beta, "81"))
    }  # fmt: skip
    jobs = {name: running_with_pods(job) for name, job in jobs.items()}

    # Each job's one pod runs on its own cluster, on that cluster's GPUs, and nowhere else.
    on_alpha = pod_models(clusters.core_of(clusters.alpha), team.slug)
    on_beta = pod_models(clusters.core_of(clusters.beta), team.slug)
    assert list(on_alpha) == jobs["alpha"].pods
    assert list(on_beta) == jobs["beta"].pods
    assert set(on_alpha.values()) <= {A100, H100}
    assert set(on_beta.values()) == {L40S}

    # Each cluster's Prometheus sees its own pod only, with its own GPU model.
    for handle, pods, model in (
        (devcluster, on_alpha, None),
        (devcluster_second, on_beta, "NVIDIA L40S"),
    ):
        series = eventually(
            lambda handle=handle: handle.prometheus_query(
                f'DCGM_FI_DEV_GPU_UTIL{{namespace="{team.slug}"}}'
            ),
            what=f"{team.slug}'s series in {handle.prometheus_url}",
        )
        assert {s["metric"]["pod"] for s in series} == set(pods)
        if model:
            assert {s["metric"]["modelName"] for s in series} == {model}

    # The portal reads each cluster's utilisation from that cluster's Prometheus.
    api.as_user(member_of(team, "lead"))
    url = f"/api/v1/monitoring/teams/{team.slug}/utilisation/?window=1h&cluster="

    def latest(cluster: str):
        body = api.get(url + cluster).json()
        points = [p for s in body["series"] for p in s["points"] if p[1] is not None]
        return points[-1][1] if points else None

    eventually(lambda: latest("alpha") == 37, what="alpha's series at 37%")
    eventually(lambda: latest("beta") == 81, what="beta's series at 81%")
    for cluster, pods in (("alpha", on_alpha), ("beta", on_beta)):
        body = api.get(f"/api/v1/monitoring/teams/{team.slug}/pods/?cluster={cluster}").json()
        assert body["cluster"] == cluster
        assert [p["pod"] for p in body["pods"]] == list(pods)

    # So does the team's dashboard, one cluster at a time.
    page = client_as(member_of(team, "lead"))
    for cluster, pods, utilisation in (("alpha", on_alpha, 37), ("beta", on_beta, 81)):
        response = page.get(f"/monitoring/teams/{team.slug}/?cluster={cluster}&window=1h")
        assert response.status_code == 200
        assert response.context["cluster"].name == cluster
        assert chart_values(response, "utilisation") == dict.fromkeys(pods, utilisation)


def test_kueue_queues_are_made_on_the_kueue_cluster_only_and_admit_its_jobs(
    make_team, clusters, grant, admin_user, running_services, k8s, k8s_second
):
    beta = queueing.cluster_set_quota_mode(
        actor=admin_user, cluster=clusters.beta, quota_mode=QuotaMode.KUEUE
    )
    wait_for(
        lambda: ClusterState.objects.filter(cluster=beta, status=ClusterState.Status.IN_SYNC),
        timeout=90,
        what="beta's flavors and priority classes",
    )
    team = make_team()
    queues = [cluster_queue_name(settings.PORTAL_NAME, team.slug, kind) for kind in LOCAL_QUEUES]
    on_alpha = KueueObjects(k8s, settings.PORTAL_NAME)
    on_beta = KueueObjects(k8s_second, settings.PORTAL_NAME)
    try:
        grant(team, clusters.alpha, 1)
        grant(team, beta, 2, gpu_model=L40S)

        wait_for(
            lambda: (
                all(on_beta.get("clusterqueues", q) for q in queues)
                and all(on_beta.get("localqueues", k, team.slug) for k in LOCAL_QUEUES)
            ),
            timeout=90,
            what=f"{team.slug}'s queues on beta",
        )
        l40s = resource_flavor_name(settings.PORTAL_NAME, L40S)
        wait_for(
            lambda: (
                {f: g for f, g in on_beta.nominal_quota(queues[0]).items() if g not in ("0", 0)}
                == {l40s: "2"}
            ),
            timeout=90,
            what="beta's guaranteed queue holding the 2 L40S granted there",
        )
        assert on_beta.get("resourceflavors", l40s) is not None
        # Alpha enforces its grant with its ResourceQuota only: no queue of the team there, and
        # no flavor of beta's GPUs (other sessions may run Kueue tests on alpha meanwhile).
        assert not any(on_alpha.get("clusterqueues", q) for q in queues)
        assert on_alpha.names("localqueues", team.slug) == []
        assert on_alpha.get("resourceflavors", l40s) is None

        member = member_of(team, "member")
        queued = submitted(submit(member, team, beta, name="queued", gpus=2, gpu_model=L40S))
        plain = submitted(submit(member, team, clusters.alpha, name="plain", gpus=1))
        queued, plain = running_with_pods(queued), running_with_pods(plain)

        assert queued.queue_name == "guaranteed"
        assert queued.admitted_at is not None
        assert queued.admitted_flavor == l40s
        assert plain.queue_name == ""
        assert plain.admitted_at is None
        assert set(pod_models(clusters.core_of(beta), team.slug).values()) == {L40S}
        assert list(pod_models(clusters.core_of(clusters.alpha), team.slug)) == plain.pods
    finally:
        delete_namespace(clusters.core_of(beta), team.slug)  # its Workloads go with it
        for queue in queues:
            on_beta.delete("clusterqueues", queue)
        wait_for(
            lambda: not any(on_beta.get("clusterqueues", q) for q in queues),
            timeout=120,
            what="the team's ClusterQueues gone from beta",
        )
