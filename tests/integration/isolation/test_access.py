"""Access to a team's namespace follows membership exactly. Leads and members get the portal's
own roles (deploy/team-roles.yaml), which cannot write RBAC or mint lasting credentials, so
nobody can leave a way in behind: no RoleBinding made by hand, no service-account token. When a
member is removed, a user deactivated or a team archived, the portal's bindings change and
nothing else grants anything."""

import pytest
from kubernetes import client

from tenants import services
from tenants.audit import snapshot
from tests.integration.conftest import wait_for
from tests.integration.portal_identity import access_allowed

from .conftest import cpu_pod, refusal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def team(iso_cluster, make_team, onboard):
    team = make_team("acc")
    team.users = onboard(team, iso_cluster, lead=f"lead-{team.slug}", members=[f"mo-{team.slug}"])
    return team


def can_list_pods(api: client.ApiClient, namespace: str) -> bool:
    try:
        client.CoreV1Api(api).list_namespaced_pod(namespace)
    except client.ApiException as error:
        if error.status == 403:
            return False
        raise
    return True


def binding(name: str, role: str, subject: dict) -> dict:
    return {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }


OUTSIDER = {"apiGroup": RBAC, "kind": "User", "name": "portal:outsider"}


@pytest.mark.parametrize("role", ["member", "edit", "view"])
def test_a_lead_cannot_bind_anyone_by_hand(team, member, portal, role):
    lead = member(f"portal:lead-{team.slug}")
    role_name = f"{portal.name}-member" if role == "member" else role

    status, _ = refusal(
        client.RbacAuthorizationV1Api(lead).create_namespaced_role_binding,
        team.slug,
        binding("by-hand", role_name, OUTSIDER),
    )

    assert status == 403
    assert not can_list_pods(member("portal:outsider"), team.slug)


def test_a_lead_cannot_make_a_role_either(team, member):
    lead = client.RbacAuthorizationV1Api(member(f"portal:lead-{team.slug}"))
    role = {
        "metadata": {"name": "everything"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    }

    status, _ = refusal(lead.create_namespaced_role, team.slug, role)

    assert status == 403


def test_a_lead_cannot_mint_a_service_account_token(team, member):
    lead = client.CoreV1Api(member(f"portal:lead-{team.slug}"))
    lead.create_namespaced_service_account(team.slug, {"metadata": {"name": "robot"}})

    status, _ = refusal(
        lead.create_namespaced_service_account_token,
        "robot",
        team.slug,
        {"spec": {"expirationSeconds": 3600 * 24 * 365}},
    )
    secret_status, message = refusal(
        lead.create_namespaced_secret,
        team.slug,
        {
            "metadata": {
                "name": "robot-token",
                "annotations": {"kubernetes.io/service-account.name": "robot"},
            },
            "type": "kubernetes.io/service-account-token",
        },
    )

    assert status == 403
    assert secret_status == 403
    assert "Service-account token Secrets are not allowed" in message


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource"),
    [
        ("create", "rolebindings", RBAC, ""),
        ("patch", "rolebindings", RBAC, ""),
        ("create", "roles", RBAC, ""),
        ("impersonate", "serviceaccounts", "", ""),
        ("impersonate", "users", "", ""),
        ("create", "serviceaccounts", "", "token"),
        ("patch", "networkpolicies", "networking.k8s.io", ""),
        ("create", "daemonsets", "apps", ""),
        ("create", "resourceclaims", "resource.k8s.io", ""),
        ("create", "pods", "", "ephemeralcontainers"),
        ("patch", "resourcequotas", "", ""),
        ("patch", "namespaces", "", ""),
    ],
)
def test_a_lead_may_not(team, member, verb, resource, group, subresource):
    lead = member(f"portal:lead-{team.slug}")

    assert not access_allowed(
        lead, verb, resource, group=group, subresource=subresource, namespace=team.slug
    )


def test_a_service_account_token_can_do_nothing_in_the_namespace(team, core, k8s):
    """The token every pod of the namespace mounts (here made by the cluster admin): the
    namespace's service accounts are bound to nothing, so whoever holds it cannot act there."""
    token = core.create_namespaced_service_account_token(
        "default", team.slug, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    configuration = client.Configuration()
    configuration.host = k8s.configuration.host
    configuration.ssl_ca_cert = k8s.configuration.ssl_ca_cert
    configuration.api_key = {"authorization": f"Bearer {token}"}
    api = client.ApiClient(configuration)

    assert not can_list_pods(api, team.slug)
    status, _ = refusal(client.CoreV1Api(api).create_namespaced_pod, team.slug, cpu_pod("robot"))
    api.close()
    assert status == 403


def test_a_removed_member_can_no_longer_act_in_the_namespace(team, admin_user, member, k8s):
    mo = member(f"portal:mo-{team.slug}")
    assert can_list_pods(mo, team.slug)

    services.membership_remove(actor=admin_user, team=team, user=team.users[f"mo-{team.slug}"])

    wait_for(lambda: not can_list_pods(mo, team.slug), timeout=60, what="mo's access to go")
    assert_never_bound(k8s, team.slug, f"portal:mo-{team.slug}")


def test_a_deactivated_user_is_dropped_from_every_binding(team, admin_user, member, k8s):
    lead_user = team.users[f"lead-{team.slug}"]
    lead = member(f"portal:lead-{team.slug}")
    assert can_list_pods(lead, team.slug)
    before = snapshot(lead_user)

    # What the Django admin does when an admin unticks "active"
    # (tests/integration/pages/test_admin_isolation.py).
    lead_user.is_active = False
    lead_user.save()
    services.user_access_changed(actor=admin_user, user=lead_user, before=before)

    wait_for(lambda: not can_list_pods(lead, team.slug), timeout=60, what="the lead's access")
    assert_never_bound(k8s, team.slug, f"portal:lead-{team.slug}")


def test_nobody_acts_in_an_archived_teams_namespace(team, admin_user, member):
    lead = member(f"portal:lead-{team.slug}")
    mo = member(f"portal:mo-{team.slug}")
    assert can_list_pods(lead, team.slug)

    services.team_archive(actor=admin_user, team=team)

    wait_for(
        lambda: not can_list_pods(lead, team.slug) and not can_list_pods(mo, team.slug),
        timeout=60,
        what="every member's access to the archived team's namespace",
    )


def assert_never_bound(api, namespace: str, identity: str) -> None:
    bindings = client.RbacAuthorizationV1Api(api).list_namespaced_role_binding(namespace).items
    assert identity not in {s.name for b in bindings for s in b.subjects or []}
