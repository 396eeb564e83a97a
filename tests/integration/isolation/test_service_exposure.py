"""What a team exposes: Services stay inside the cluster (a member's kubectl cannot make a
NodePort or LoadBalancer Service, nor one with externalIPs, until a portal admin allows it for
the team, and the portal then labels the team's namespaces, which members cannot change), and
HTTP routes stay in the team's own domain under the cluster's apps domain."""

import pytest
from kubernetes import client

from tenants import services
from tests.integration.conftest import wait_for

from .conftest import refusal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

REFUSAL = "Services in team namespaces stay inside the cluster"


def service(name: str, **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec},
    }


OUTSIDE = {
    "NodePort": service("node-port", type="NodePort"),
    "LoadBalancer": service("load-balancer", type="LoadBalancer"),
    "externalIPs": service("external-ip", externalIPs=["203.0.113.7"]),
}


def exposable(core, namespace: str, name: str) -> bool:
    try:
        core.create_namespaced_service(namespace, OUTSIDE[name], dry_run="All")
    except client.ApiException as error:
        if error.status == 403 and REFUSAL in (error.body or ""):
            return False
        raise
    return True


@pytest.fixture
def team_with_member(iso_cluster, make_team, onboard, member):
    team = make_team("expose")
    onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    return team, client.CoreV1Api(member(f"portal:mo-{team.slug}"))


def test_a_member_cannot_expose_a_service_outside_the_cluster(team_with_member):
    team, mo = team_with_member

    answers = {}
    for what, manifest in OUTSIDE.items():
        status, message = refusal(mo.create_namespaced_service, team.slug, manifest, dry_run="All")
        answers[what] = (status, REFUSAL in message)

    assert answers == dict.fromkeys(OUTSIDE, (403, True))
    inside = mo.create_namespaced_service(team.slug, service("inside"), dry_run="All")
    assert inside.spec.type == "ClusterIP"


def test_an_admin_allows_a_team_to_expose_services(team_with_member, admin_user, core, portal):
    team, mo = team_with_member

    services.team_update(actor=admin_user, team=team, external_services_allowed=True)

    wait_for(
        lambda: (
            core.read_namespace(team.slug).metadata.labels.get("gpuportal.io/external-services")
            == "allowed"
        ),
        timeout=60,
        what="the namespace labelled by the team's reconcile",
    )
    wait_for(lambda: exposable(mo, team.slug, "NodePort"), timeout=30, what="a NodePort")
    assert exposable(mo, team.slug, "LoadBalancer")
    status, _ = refusal(
        client.CoreV1Api(mo.api_client).patch_namespace,
        team.slug,
        {"metadata": {"labels": {"gpuportal.io/external-services": "allowed"}}},
    )
    assert status == 403  # members cannot label their namespace themselves


def ingress(name: str, *hosts: str, **extra) -> dict:
    backend = {"service": {"name": "inside", "port": {"number": 80}}}
    path = {"path": "/", "pathType": "Prefix", "backend": backend}
    rules = [{"host": host, "http": {"paths": [path]}} for host in hosts]
    if not hosts:
        rules = [{"http": {"paths": [path]}}]
    manifest = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, **extra.pop("metadata", {})},
        "spec": {"rules": rules, **extra},
    }
    return manifest


def test_an_ingress_stays_in_the_teams_own_domain(team_with_member, iso_cluster):
    team, mo = team_with_member
    networking = client.NetworkingV1Api(mo.api_client)
    own = f"{team.slug}.{iso_cluster.apps_domain}"
    refused = {
        "no host: every request": ingress("catch-all"),
        "another team's domain": ingress("theirs", f"api.vision.{iso_cluster.apps_domain}"),
        "a domain of no team": ingress("elsewhere", "portal.example.com"),
        "a suffix look-alike": ingress("lookalike", f"x{own}"),
        "a configuration snippet": ingress(
            "snippet",
            f"api.{own}",
            metadata={
                "annotations": {
                    "nginx.ingress.kubernetes.io/configuration-snippet": "proxy_pass http://x;"
                }
            },
        ),
        "a default backend": ingress(
            "default",
            f"api.{own}",
            defaultBackend={"service": {"name": "inside", "port": {"number": 80}}},
        ),
    }

    answers = {}
    for what, manifest in refused.items():
        status, _ = refusal(
            networking.create_namespaced_ingress, team.slug, manifest, dry_run="All"
        )
        answers[what] = status

    assert answers == dict.fromkeys(refused, 403)
    made = networking.create_namespaced_ingress(
        team.slug, ingress("mine", f"api.{own}", own, f"*.{own}"), dry_run="All"
    )
    assert [rule.host for rule in made.spec.rules] == [f"api.{own}", own, f"*.{own}"]
