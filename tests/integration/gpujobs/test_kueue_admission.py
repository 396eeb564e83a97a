"""On a Kueue cluster a job that does not fit the team's free quota is accepted (it waits in the
queue) and only a job that can never run is refused, with a 400 naming ``gpus`` and why: more
GPUs than a node of the model has, a guaranteed job beyond the team's own quota, an
opportunistic one beyond what the team may borrow. The team queue endpoint checks its input.
Nothing is created on a cluster here (the worker is not running)."""

import datetime

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from clusters.models import GpuModelCapacity, QuotaMode
from gpujobs.models import GpuJob, QueueSnapshot
from tenants.models import TeamQueuePolicy
from tests import factories

pytestmark = pytest.mark.django_db

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def kueue(cluster, team):
    cluster.quota_mode = QuotaMode.KUEUE
    cluster.save()
    GpuModelCapacity.objects.create(
        cluster=cluster, gpu_model=A100, allocatable=32, nodes=4, max_per_node=8
    )
    GpuModelCapacity.objects.create(
        cluster=cluster, gpu_model=H100, allocatable=16, nodes=2, max_per_node=8
    )
    today = timezone.localdate()
    for model, gpus in ((A100, 4), ("", 2)):
        factories.QuotaGrantFactory(
            request__team=team,
            request__cluster=cluster,
            request__gpus=gpus,
            gpu_model=model,
            ends_on=today + datetime.timedelta(days=9),
        )
    return cluster


def post(user, cluster, team, **body):
    api = APIClient()
    api.force_authenticate(user=user)
    payload = {
        "team": team.slug,
        "cluster": cluster.name,
        "name": "j",
        "image": "registry.example.com/ml/trainer:1",
        **body,
    }
    return api.post("/api/v1/jobs/", payload, format="json")


def test_a_guaranteed_job_beyond_the_free_quota_waits_instead_of_being_refused(kueue, team, member):
    GpuJob.objects.create(
        team=team,
        cluster=kueue,
        submitted_by=member,
        name="holds",
        image="registry.example.com/a:1",
        gpus=4,
        max_runtime_seconds=60,
        queue_name="guaranteed",
        state="running",
    )

    response = post(member, kueue, team, gpus=4, gpu_model=A100)

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["priority"], body["queue"], body["state"]) == (
        "guaranteed",
        "guaranteed",
        "queued",
    )


def test_a_guaranteed_job_larger_than_the_teams_own_quota_is_refused_naming_gpus(
    kueue, team, member
):
    response = post(member, kueue, team, gpus=5, gpu_model=A100)

    assert response.status_code == 400
    assert response.json() == {
        "gpus": [
            f"A guaranteed job runs only within team vision's own quota, and the most it holds "
            f"of {A100} GPUs on cluster gpu-east is 4; this job asks for 5, so it could never "
            "start. Submit it as opportunistic to borrow GPUs other teams leave idle (it may then "
            "be preempted), or ask for more quota."
        ]
    }
    assert not GpuJob.objects.exists()


def test_only_a_guaranteed_job_that_names_no_model_may_use_the_any_model_quota(kueue, team, member):
    # Kueue never gives a job that names a model the flavor of grants of any model.
    assert post(member, kueue, team, gpus=1, gpu_model=H100).status_code == 400
    assert post(member, kueue, team, gpus=4).status_code == 201  # its A100 quota
    assert post(member, kueue, team, gpus=5).status_code == 400


def test_a_job_larger_than_any_node_of_its_model_is_refused(kueue, team, member):
    response = post(member, kueue, team, gpus=9, gpu_model=A100, priority="opportunistic")

    assert response.status_code == 400
    assert response.json()["gpus"] == [
        "This job can never run: it asks for 9 GPUs, a job runs on one node, and the largest "
        f"node of cluster gpu-east has 8 {A100} GPUs."
    ]


def test_an_opportunistic_job_beyond_the_teams_borrowing_limit_is_refused(kueue, team, member):
    TeamQueuePolicy.objects.create(team=team, cluster=kueue, borrowing_limit=3)

    assert post(member, kueue, team, gpus=3, priority="opportunistic").status_code == 201
    response = post(member, kueue, team, gpus=4, priority="opportunistic")

    assert response.status_code == 400
    assert (
        "may borrow at most 3 GPUs on cluster gpu-east (its borrowing limit)"
        in (response.json()["gpus"][0])
    )


def test_an_unknown_kind_of_work_is_refused_naming_priority(kueue, team, member):
    response = post(member, kueue, team, gpus=1, priority="urgent")

    assert response.status_code == 400
    assert list(response.json()) == ["priority"]


def test_under_quota_only_the_free_quota_still_decides(cluster, team, member):
    factories.QuotaGrantFactory(request__team=team, request__cluster=cluster, request__gpus=2)

    response = post(member, cluster, team, gpus=3, priority="opportunistic")

    assert response.status_code == 400
    assert "exceeding it by 1" in response.json()["gpus"][0]
    assert post(member, cluster, team, gpus=2).json()["queue"] == ""


def test_the_team_queue_needs_a_known_cluster_and_is_hidden_from_other_teams(
    kueue, team, member, other_team
):
    api = APIClient()
    api.force_authenticate(user=member)

    assert api.get(f"/api/v1/teams/{team.slug}/queue/").json() == {
        "cluster": ["Give the cluster's name: ?cluster=<name>."]
    }
    assert api.get(f"/api/v1/teams/{team.slug}/queue/", {"cluster": "nope"}).status_code == 400
    assert (
        api.get(f"/api/v1/teams/{other_team.slug}/queue/", {"cluster": kueue.name}).status_code
        == 404
    )
    body = api.get(f"/api/v1/teams/{team.slug}/queue/", {"cluster": kueue.name}).json()
    assert (body["kueue"], body["waiting"], body["admitted"]) == (True, [], [])


def test_the_team_queue_reports_what_the_watcher_last_read_of_kueue(kueue, team, member):
    QueueSnapshot.objects.create(
        cluster=kueue,
        taken_at=timezone.now(),
        kueue_error="Kueue on cluster gpu-east is not admitting: it does not answer.",
    )
    api = APIClient()
    api.force_authenticate(user=member)

    body = api.get(f"/api/v1/teams/{team.slug}/queue/", {"cluster": kueue.name}).json()

    assert body["kueue_admitting"] is False
    assert body["kueue_error"].startswith("Kueue on cluster gpu-east is not admitting")
