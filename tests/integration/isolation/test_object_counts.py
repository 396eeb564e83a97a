"""The team's ResourceQuota caps the objects a member's kubectl can make, besides GPUs: Jobs,
pods, Services, ConfigMaps, Secrets, claims and their storage, from the cluster's caps with an
admin's for the team over them."""

import pytest
from kubernetes import client

from tenants import object_limits
from tests.integration.conftest import wait_for

from .conftest import refusal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


def config_map(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def claim(name: str, size: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def test_a_member_cannot_make_more_objects_than_the_teams_caps(
    iso_cluster, make_team, onboard, member, admin_user, core, portal
):
    iso_cluster.object_limits = {"requests.storage": "10Gi"}
    iso_cluster.save(update_fields=["object_limits"])
    team = make_team("counted")
    onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    mo = client.CoreV1Api(member(f"portal:mo-{team.slug}"))
    # The namespace holds one ConfigMap of its own (kube-root-ca.crt): two more fill a cap of 3.
    object_limits.team_object_limits_set(
        actor=admin_user, team=team, cluster=iso_cluster, limits={"configmaps": "3"}
    )

    def capped():
        quota = core.read_namespaced_resource_quota(f"{portal.name}-quota", team.slug)
        return (quota.status.hard or {}).get("configmaps") == "3"

    wait_for(capped, timeout=60, what="the team's cap in its quota, counted")
    mo.create_namespaced_config_map(team.slug, config_map("one"))
    mo.create_namespaced_config_map(team.slug, config_map("two"))
    status, message = refusal(mo.create_namespaced_config_map, team.slug, config_map("three"))

    assert status == 403
    assert "exceeded quota" in message
    assert "configmaps=3" in message
    status, message = refusal(
        mo.create_namespaced_persistent_volume_claim, team.slug, claim("big", "20Gi")
    )
    assert status == 403
    assert "requests.storage" in message
