"""An admin's change of a cluster's allowed registries through the clusters API reaches the
cluster's admission policies at once: the real worker reconciles the cluster after the change
commits, and a member's pod from the newly listed registry is admitted, then refused again once
the registry is taken off the list (devcluster, with the member's own credentials)."""

import copy

import pytest
from kubernetes import client

from clusters.models import Cluster
from tenants.models import AuditEvent
from tests.integration.conftest import wait_for

from .conftest import ALLOWED_REGISTRIES, cpu_pod

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

NGC_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


@pytest.fixture
def team_with_member(iso_cluster, make_team, onboard, member):
    team = make_team("reg")
    onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    return team, client.CoreV1Api(member(f"portal:mo-{team.slug}"))


def admitted(mo: client.CoreV1Api, namespace: str, image: str) -> int:
    """201 when the API server admits a pod of ``image`` (not made: a dry run), else its
    refusal's status."""
    try:
        mo.create_namespaced_pod(
            namespace, copy.deepcopy(cpu_pod("ngc", image=image)), dry_run="All"
        )
    except client.ApiException as error:
        return error.status
    return 201


def test_a_registry_an_admin_lists_in_the_api_is_admitted_on_the_cluster_and_unlisted_again(
    team_with_member, iso_cluster, api, admin_user
):
    team, mo = team_with_member
    # A new policy takes a moment to reach the API server's admission.
    wait_for(
        lambda: admitted(mo, team.slug, NGC_IMAGE) == 403,
        timeout=60,
        what="the cluster's policy to refuse nvcr.io",
    )
    url = f"/api/v1/clusters/{iso_cluster.name}/"

    listed = api.as_user(admin_user).patch(
        url, {"allowed_registries": [*ALLOWED_REGISTRIES, "nvcr.io"]}
    )

    assert listed.status_code == 200, listed.data
    wait_for(
        lambda: admitted(mo, team.slug, NGC_IMAGE) == 201,
        timeout=60,
        what="the cluster's policy to admit nvcr.io",
    )
    assert admitted(mo, team.slug, "ghcr.io/x/y:1") == 403

    unlisted = api.patch(url, {"allowed_registries": list(ALLOWED_REGISTRIES)})

    assert unlisted.status_code == 200
    wait_for(
        lambda: admitted(mo, team.slug, NGC_IMAGE) == 403,
        timeout=60,
        what="the cluster's policy to refuse nvcr.io again",
    )
    assert Cluster.objects.get(pk=iso_cluster.pk).allowed_registries == ALLOWED_REGISTRIES
    assert AuditEvent.objects.filter(action="cluster.settings_changed").count() == 2


def test_allowing_every_registry_in_the_api_lifts_the_policys_registry_rule(
    team_with_member, iso_cluster, api, admin_user
):
    team, mo = team_with_member
    url = f"/api/v1/clusters/{iso_cluster.name}/"

    opened = api.as_user(admin_user).patch(url, {"allow_all_registries": True})

    assert opened.status_code == 200
    wait_for(
        lambda: admitted(mo, team.slug, "ghcr.io/x/y:1") == 201,
        timeout=60,
        what="the cluster's policy to admit any registry",
    )
    api.patch(url, {"allow_all_registries": False})
    wait_for(
        lambda: admitted(mo, team.slug, "ghcr.io/x/y:1") == 403,
        timeout=60,
        what="the cluster's policy to refuse other registries again",
    )
