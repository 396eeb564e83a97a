"""The demo cluster's allowed registries (``seed_demo``): the common public registries besides the
demo's own, so that a newcomer's first job (``nvcr.io/nvidia/pytorch``, ``pytorch/pytorch``)
passes the portal's registry check; a demo made before gets them added on the next run, with what
an admin added kept. Nothing is enqueued: the test's transaction never commits."""

import io

import pytest
from django.core.management import call_command

from clusters.models import Cluster
from tenants.models import AuditEvent
from workloads.admission import check_image

pytestmark = pytest.mark.django_db

PUBLIC = ["nvcr.io", "docker.io", "ghcr.io", "quay.io", "registry.k8s.io"]


def seed() -> Cluster:
    call_command("seed_demo", stdout=io.StringIO(), stderr=io.StringIO())
    return Cluster.objects.get(name="devcluster")


def refusal(cluster: Cluster, image: str) -> str | None:
    errors: dict[str, str] = {}
    check_image(image, cluster=cluster, errors=errors, key="image")
    return errors.get("image")


def test_the_demo_cluster_allows_the_common_public_registries_and_its_own_only():
    cluster = seed()

    assert cluster.allow_all_registries is False
    assert set(cluster.allowed_registries) == {"registry.example.com", *PUBLIC}
    assert "does not allow" in refusal(cluster, "evil.example.com/miner:1")


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "python:3.12-slim",
        "ghcr.io/huggingface/text-generation-inference:2.0",
        "quay.io/jupyter/pytorch-notebook:latest",
        "registry.k8s.io/pause:3.9",
    ],
)
def test_a_newcomers_first_image_passes_the_registry_check(image):
    assert refusal(seed(), image) is None


def test_a_demo_made_before_gets_the_public_registries_and_keeps_an_admins(django_user_model):
    cluster = seed()
    cluster.allowed_registries = ["registry.example.com", "harbor.example.org/ml"]
    cluster.save(update_fields=["allowed_registries"])

    cluster = seed()

    assert cluster.allowed_registries == [
        "registry.example.com",
        "harbor.example.org/ml",
        *PUBLIC,
    ]
    event = AuditEvent.objects.get(action="cluster.settings_changed")
    assert event.actor.username == "admin"
    assert refusal(cluster, "nvcr.io/nvidia/pytorch:24.05-py3") is None
    # A third run finds nothing missing.
    seed()
    assert AuditEvent.objects.filter(action="cluster.settings_changed").count() == 1
