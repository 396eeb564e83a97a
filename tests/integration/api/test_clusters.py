"""Clusters: everyone signed in sees capacity per GPU kind; only admins change overcommit."""

from decimal import Decimal

import pytest

from clusters.models import Cluster
from tenants.models import AuditEvent
from tests import factories

pytestmark = pytest.mark.django_db


def gpu_row(cluster_data, resource="nvidia.com/gpu"):
    return next(row for row in cluster_data["gpus"] if row["resource_name"] == resource)


def test_cluster_shows_capacity_plannable_granted_and_free_per_gpu_kind(api, lead, cluster, grant):
    response = api.as_user(lead).get("/api/v1/clusters/gpu-east/")

    assert response.status_code == 200
    assert response.data["overcommit_ratio"] == "1.00"
    assert response.data["gpus"] == [
        {
            "resource_name": "nvidia.com/gpu",
            "gpu_model": "NVIDIA-A100-SXM4-80GB",
            "capacity": 16,
            "plannable": 16,
            "granted": 4,
            "free": 12,
        }
    ]


def test_cluster_lists_each_gpu_kind_it_offers(api, lead, cluster):
    factories.GpuCapacityFactory(
        cluster=cluster, resource_name="nvidia.com/mig-1g.10gb", allocatable=28, admin_cap=14
    )

    response = api.as_user(lead).get("/api/v1/clusters/")

    (row,) = response.data["results"]
    assert [gpu["resource_name"] for gpu in row["gpus"]] == [
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
    ]
    assert gpu_row(row, "nvidia.com/mig-1g.10gb")["capacity"] == 14


def test_revoked_grants_do_not_count_as_granted(api, lead, cluster, grant):
    grant.state = "revoked"
    grant.save()

    response = api.as_user(lead).get("/api/v1/clusters/gpu-east/")

    assert gpu_row(response.data)["granted"] == 0


def test_outsider_may_read_clusters(api, outsider, cluster):
    response = api.as_user(outsider).get("/api/v1/clusters/")

    assert response.status_code == 200
    assert response.data["count"] == 1


def test_unknown_cluster_is_404(api, lead, cluster):
    response = api.as_user(lead).get("/api/v1/clusters/nowhere/")

    assert response.status_code == 404


def test_admin_raises_overcommit_and_plannable_follows(api, admin, cluster):
    response = api.as_user(admin).patch("/api/v1/clusters/gpu-east/", {"overcommit_ratio": "1.5"})

    assert response.status_code == 200
    assert response.data["overcommit_ratio"] == "1.50"
    assert gpu_row(response.data)["plannable"] == 24
    assert Cluster.objects.get(pk=cluster.pk).overcommit_ratio == Decimal("1.50")
    assert AuditEvent.objects.filter(action="cluster.overcommit_changed").exists()


@pytest.mark.parametrize("user_fixture", ["lead", "member", "outsider"])
def test_non_admin_cannot_change_overcommit(api, request, cluster, user_fixture):
    user = request.getfixturevalue(user_fixture)

    response = api.as_user(user).patch("/api/v1/clusters/gpu-east/", {"overcommit_ratio": "3"})

    assert response.status_code == 403
    assert "Only portal admins" in response.data["detail"]
    assert Cluster.objects.get(pk=cluster.pk).overcommit_ratio == Decimal("1.00")


@pytest.mark.parametrize("ratio", ["0", "-1", "100.01", "abc", "1.234"])
def test_bad_overcommit_ratio_is_400_on_overcommit_ratio(api, admin, cluster, ratio):
    response = api.as_user(admin).patch("/api/v1/clusters/gpu-east/", {"overcommit_ratio": ratio})

    assert response.status_code == 400
    assert list(response.data) == ["overcommit_ratio"]
