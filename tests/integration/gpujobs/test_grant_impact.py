"""The impact preview on the devcluster: the jobs it lists as over quota are exactly the running
jobs of the team's namespace that no longer fit (the newest first), and shrinking the grant
then does what the preview says: they keep running, new work is refused."""

import pytest
from django.conf import settings

from clusters.vocabulary import resource_flavor_name
from gpujobs.models import GpuJob
from tenants import quota
from tests import factories
from tests.integration.gpujobs.fixtures import (
    api_client_for,
    submit,
    wait_for_job,
    wait_for_quota,
    wait_for_state,
)
from tests.integration.gpujobs.kueue import A100, H100
from workloads.pod_states import Reason

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


@pytest.fixture(autouse=True)
def _services(running_services):
    """Every test here needs the worker and the watcher."""


def running_pod_jobs(core, namespace: str) -> dict[int, int]:
    """Job id -> GPUs its running pod asks for, read from the cluster."""
    held = {}
    for pod in core.list_namespaced_pod(namespace).items:
        if pod.status.phase != "Running":
            continue
        gpus = sum(
            int((c.resources.requests or {}).get("nvidia.com/gpu", 0)) for c in pod.spec.containers
        )
        held[int(pod.metadata.labels["gpuportal.io/job-id"])] = gpus
    return held


def test_preview_lists_exactly_the_running_jobs_over_the_shrunk_quota(
    make_gpu_team, gpu_cluster, core
):
    gpu = make_gpu_team(gpus=4)
    (grant,) = gpu.grants
    ids = []
    for name, gpus in (("pretrain", 2), ("finetune", 1), ("eval", 1)):
        job_id = submit(gpu.member, gpu.team, gpu_cluster, name=name, gpus=gpus).data["id"]
        wait_for_state(job_id, "running")
        ids.append(job_id)
    pretrain, finetune, evaluation = ids
    assert running_pod_jobs(core, gpu.namespace) == {pretrain: 2, finetune: 1, evaluation: 1}
    admin = factories.AdminFactory(username="impact-admin")
    api = api_client_for(admin)

    shrink = api.get(f"/api/v1/quota-grants/{grant.pk}/impact/?gpus=2")
    revoke = api.get(f"/api/v1/quota-grants/{grant.pk}/impact/")

    assert shrink.status_code == 200
    assert (shrink.data["quota_now"], shrink.data["quota_after"], shrink.data["held"]) == (4, 2, 4)
    assert [(w["kind"], w["id"]) for w in shrink.data["over_quota"]] == [
        ("job", evaluation),
        ("job", finetune),
    ]
    assert [w["id"] for w in revoke.data["over_quota"]] == [evaluation, finetune, pretrain]
    assert sum(w["gpus"] for w in revoke.data["over_quota"]) == sum(
        running_pod_jobs(core, gpu.namespace).values()
    )

    # What the preview said happens: the shrink reaches the cluster, the jobs keep running, and
    # new work is refused until the team fits.
    quota.quota_grant_shrink(actor=admin, grant=grant, gpus=2)
    wait_for_quota(core, gpu.namespace, 2)
    refused = submit(gpu.member, gpu.team, gpu_cluster, name="more", gpus=1)

    assert refused.status_code == 400
    assert "gpus" in refused.data
    assert running_pod_jobs(core, gpu.namespace) == {pretrain: 2, finetune: 1, evaluation: 1}
    running = GpuJob.objects.filter(team=gpu.team, state="running").values_list("pk", flat=True)
    assert set(running) == set(ids)
    for job_id in ids:
        api_client_for(gpu.member).post(f"/api/v1/jobs/{job_id}/cancel/")


def test_in_kueue_mode_the_preview_counts_the_grants_model_and_new_work_then_waits(
    make_kueue_team, kueue_cluster
):
    cluster = kueue_cluster.cluster
    gpu = make_kueue_team({H100: 4, A100: 2}, name="impact")
    h100_grant = next(g for g in gpu.grants if g.gpu_model == H100)
    ids = {}
    for name, gpus, model in (("h-old", 2, H100), ("a-only", 2, A100), ("h-new", 2, H100)):
        response = submit(gpu.member, gpu.team, cluster, name=name, gpus=gpus, gpu_model=model)
        assert response.status_code == 201, response.content
        ids[name] = wait_for_state(response.data["id"], "running", timeout=60).pk
    api = api_client_for(kueue_cluster.admin)

    preview = api.get(f"/api/v1/quota-grants/{h100_grant.pk}/impact/?gpus=2")

    assert preview.status_code == 200
    assert (preview.data["quota_mode"], preview.data["gpu_model"]) == ("kueue", H100)
    assert (preview.data["quota_now"], preview.data["held"]) == (4, 4)
    assert [w["id"] for w in preview.data["over_quota"]] == [ids["h-new"]]
    assert "waits" in preview.data["consequence"]

    # As the preview said: after the shrink they keep running and new H100 work waits.
    quota.quota_grant_shrink(actor=kueue_cluster.admin, grant=h100_grant, gpus=2)
    flavor = {m: resource_flavor_name(settings.PORTAL_NAME, m) for m in (H100, A100)}
    kueue_cluster.wait_for_own(gpu.team, {flavor[H100]: "2", flavor[A100]: "2"})
    response = submit(gpu.member, gpu.team, cluster, name="h-more", gpus=1, gpu_model=H100)

    assert response.status_code == 201, response.content
    waiting = wait_for_job(
        response.data["id"], lambda j: j.reason == Reason.IN_QUEUE, timeout=60, what="it waits"
    )
    assert waiting.state == "pending"
    running = GpuJob.objects.filter(team=gpu.team, state="running").values_list("pk", flat=True)
    assert set(running) == set(ids.values())
