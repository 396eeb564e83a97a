"""A cluster that cannot be read answers the API with the cluster's reason, from the one
exception handler: 503 with Retry-After when asking again may help (the API server does not
answer), 502 when it will not (the portal has no usable credentials for the cluster)."""

import json

import pytest

from gpujobs.models import GpuJob
from tests.integration.conftest import free_port

pytestmark = pytest.mark.django_db

READS = ("logs", "events")


@pytest.fixture
def job(team, member, cluster):
    """A job the cluster runs (so reading its logs and events asks the cluster)."""
    return GpuJob.objects.create(
        team=team,
        cluster=cluster,
        submitted_by=member,
        name="train",
        image="registry.example.com/ml/trainer:1",
        gpus=1,
        max_runtime_seconds=600,
        state=GpuJob.State.RUNNING,
        kube_uid="0d6f1a52-0000-4000-8000-000000000001",
    )


def kubeconfig_for_a_closed_port(tmp_path) -> str:
    path = tmp_path / "kubeconfig"
    server = f"https://127.0.0.1:{free_port()}"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "not-a-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


@pytest.mark.parametrize("read", READS)
def test_an_api_server_that_does_not_answer_is_a_503_to_retry(
    api, member, job, cluster, tmp_path, read
):
    cluster.kubeconfig_path = kubeconfig_for_a_closed_port(tmp_path)
    cluster.save(update_fields=["kubeconfig_path"])

    response = api.as_user(member).get(f"/api/v1/jobs/{job.pk}/{read}/")

    assert response.status_code == 503
    assert response.json() == {"detail": response.json()["detail"]}
    assert "Cannot reach the API server of cluster gpu-east" in response.json()["detail"]
    assert response["Retry-After"] == "30"


@pytest.mark.parametrize("read", READS)
def test_a_cluster_without_usable_credentials_is_a_502_saying_so(api, member, job, cluster, read):
    cluster.kubeconfig_path = "/nonexistent/kubeconfig"
    cluster.save(update_fields=["kubeconfig_path"])

    response = api.as_user(member).get(f"/api/v1/jobs/{job.pk}/{read}/")

    assert response.status_code == 502
    assert response.json() == {
        "detail": "The kubeconfig for cluster gpu-east (/nonexistent/kubeconfig) does not exist. "
        "An admin must set a readable kubeconfig path on the cluster."
    }
