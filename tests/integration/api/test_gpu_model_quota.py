"""Quota per GPU model: a lead asks for a model the cluster's nodes have, the admin sees that
model's capacity, granted and free beside the request, and approval checks the model's capacity
and the kind's total under the cluster's lock. Grants without a model count against the total."""

import pytest

from tenants.models import QuotaGrant
from tests import factories

pytestmark = pytest.mark.django_db

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
URL = "/api/v1/quota-requests/"


@pytest.fixture
def models(cluster):
    """gpu-east's 16 GPUs: 12 A100 on 3 nodes and 4 H100 on one."""
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12, nodes=3)
    factories.GpuModelCapacityFactory(
        cluster=cluster, gpu_model=H100, allocatable=4, nodes=1, max_per_node=4
    )


@pytest.fixture
def body(today):
    return {
        "team": "vision",
        "cluster": "gpu-east",
        "gpu_model": A100,
        "gpus": 4,
        "justification": "Fine-tuning the support model.",
    }


def request_of(team, cluster, model, gpus, lead):
    return factories.QuotaRequestFactory(
        team=team, cluster=cluster, gpu_model=model, gpus=gpus, requested_by=lead
    )


def approve(api, admin, quota_request, **body):
    return api.as_user(admin).post(f"{URL}{quota_request.pk}/approve/", body)


def test_a_lead_asks_for_four_a100s(api, lead, models, body):
    response = api.as_user(lead).post(URL, body)

    assert response.status_code == 201
    assert (response.data["gpu_model"], response.data["gpus"]) == (A100, 4)


def test_a_request_without_a_model_is_for_any_model(api, lead, models, body):
    del body["gpu_model"]

    response = api.as_user(lead).post(URL, body)

    assert response.status_code == 201
    assert response.data["gpu_model"] == ""


def test_a_model_no_node_has_is_400_naming_gpu_model(api, lead, models, body):
    body["gpu_model"] = "NVIDIA-V100"

    response = api.as_user(lead).post(URL, body)

    assert response.status_code == 400
    assert list(response.data) == ["gpu_model"]
    assert "NVIDIA-V100" in str(response.data["gpu_model"])
    assert A100 in str(response.data["gpu_model"])


def test_the_grant_keeps_the_model_and_the_audit_says_so(api, admin, lead, team, cluster, models):
    quota_request = request_of(team, cluster, A100, 4, lead)

    response = approve(api, admin, quota_request)

    assert response.status_code == 201
    assert response.data["gpu_model"] == A100
    grant = QuotaGrant.objects.get(pk=response.data["id"])
    assert grant.gpu_model == A100


def test_approval_beyond_the_models_capacity_is_refused_though_the_kind_has_room(
    api, admin, lead, team, cluster, models
):
    quota_request = request_of(team, cluster, H100, 6, lead)

    response = approve(api, admin, quota_request)

    assert response.status_code == 400
    assert "Not enough NVIDIA-H100-80GB-HBM3 capacity" in response.data["gpus"][0]
    assert approve(api, admin, quota_request, gpus=4).status_code == 201


def test_grants_of_any_model_count_against_the_total(
    api, admin, lead, team, other_team, other_lead, cluster, models
):
    approve(api, admin, request_of(other_team, cluster, "", 14, other_lead))
    a100s = request_of(team, cluster, A100, 4, lead)

    response = approve(api, admin, a100s)

    # 4 A100 fit the model (12 free) but not the kind: 14 of 16 are granted already.
    assert response.status_code == 400
    assert "Not enough capacity" in response.data["gpus"][0]
    assert approve(api, admin, a100s, gpus=2).status_code == 201


def test_the_review_queue_shows_capacity_granted_and_free_per_model(
    api, admin, lead, team, other_team, other_lead, cluster, models
):
    approve(api, admin, request_of(other_team, cluster, A100, 8, other_lead))
    pending = request_of(team, cluster, A100, 6, lead)

    items = api.as_user(admin).get(f"{URL}review-queue/").data["results"]

    (item,) = [i for i in items if i["id"] == pending.pk]
    assert item["model_capacity"] == {
        "capacity": 12,
        "plannable": 12,
        "granted": 8,
        "free": 4,
        "granted_in_period": 8,
        "free_after": -2,
    }
    assert [
        (m["gpu_model"], m["capacity"], m["granted"], m["free"]) for m in item["gpu_models"]
    ] == [
        (A100, 12, 8, 4),
        (H100, 4, 0, 4),
    ]
    assert item["capacity"]["granted"] == 8  # the kind's total counts the A100 grant too


def test_a_request_of_any_model_has_no_model_figures_but_sees_every_model(
    api, admin, lead, team, cluster, models
):
    pending = request_of(team, cluster, "", 2, lead)

    (item,) = api.as_user(admin).get(f"{URL}review-queue/").data["results"]

    assert item["id"] == pending.pk
    assert item["model_capacity"] is None
    assert [m["gpu_model"] for m in item["gpu_models"]] == [A100, H100]


def test_clusters_list_their_models_with_the_largest_job_one_node_takes(api, lead, models):
    data = api.as_user(lead).get("/api/v1/clusters/gpu-east/").data

    assert data["quota_mode"] == "quota"
    assert [(m["gpu_model"], m["nodes"], m["max_per_node"]) for m in data["gpu_models"]] == [
        (A100, 3, 8),
        (H100, 1, 4),
    ]
