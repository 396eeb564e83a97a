"""Team roles become RoleBindings: members act in their team's namespace and nowhere else."""

import itertools

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from accounts import sso
from tenants import services
from tenants.models import Membership
from tests import factories
from tests.integration.conftest import wait_for

from .conftest import in_sync, wait_for_gpu_quota, wait_for_quota_status

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


def cpu_pod(name):
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.example/tool:1"}]},
    }


@pytest.fixture
def as_identity(devcluster):
    """``as_identity("portal:mo", groups=[...])``: a CoreV1Api with minted credentials."""
    clients = []

    def make(name, groups=()):
        api = config.new_client_from_config(config_file=str(devcluster.mint(name, list(groups))))
        clients.append(api)
        return client.CoreV1Api(api)

    yield make
    for api in clients:
        api.close()


def can_create_pod(core_api, namespace, name) -> bool:
    try:
        core_api.create_namespaced_pod(namespace, cpu_pod(name))
    except ApiException as error:
        if error.status == 403 and "forbidden" in error.body and "quota" not in error.body:
            return False
        raise
    return True


@pytest.fixture
def two_teams(celery_worker_process, core, kube_cluster, make_team, approve):
    """Teams A and B, each with a grant that has reached the cluster."""
    a, b = make_team("a"), make_team("b")
    approve(a, kube_cluster, gpus=2)
    approve(b, kube_cluster, gpus=2)
    for team in (a, b):
        wait_for_gpu_quota(core, team.slug, "2")
        wait_for_quota_status(core, team.slug)
    return a, b


def test_a_member_can_create_pods_in_their_team_namespace_and_is_forbidden_in_another(
    two_teams, core, kube_cluster, admin_user, as_identity
):
    a, b = two_teams
    mo = factories.UserFactory(username="mo-member")

    services.membership_set(actor=admin_user, team=a, user=mo, role=Membership.Role.MEMBER)
    in_sync(a, kube_cluster)

    mo_api = as_identity("portal:mo-member")
    assert can_create_pod(mo_api, a.slug, "mine")
    assert not can_create_pod(mo_api, b.slug, "not-mine")


def test_removing_the_member_removes_the_right(
    two_teams, core, kube_cluster, admin_user, as_identity
):
    a, _ = two_teams
    mo = factories.UserFactory(username="mo-member")
    services.membership_set(actor=admin_user, team=a, user=mo, role=Membership.Role.MEMBER)
    mo_api = as_identity("portal:mo-member")
    wait_for(lambda: can_create_pod(mo_api, a.slug, "first"), what="mo's edit binding")

    services.membership_remove(actor=admin_user, team=a, user=mo)

    attempts = itertools.count()
    wait_for(
        lambda: not can_create_pod(mo_api, a.slug, f"again-{next(attempts)}"),
        what="mo's right to go",
    )
    bindings = client.RbacAuthorizationV1Api(core.api_client).list_namespaced_role_binding(a.slug)
    subjects = [s.name for b in bindings.items for s in b.subjects or []]
    assert "portal:mo-member" not in subjects


def test_a_viewer_can_read_but_not_create(two_teams, kube_cluster, admin_user, as_identity):
    a, _ = two_teams
    vic = factories.UserFactory(username="vic-viewer")

    services.membership_set(actor=admin_user, team=a, user=vic, role=Membership.Role.VIEWER)
    in_sync(a, kube_cluster)

    vic_api = as_identity("portal:vic-viewer")
    assert vic_api.list_namespaced_pod(a.slug).items is not None
    assert not can_create_pod(vic_api, a.slug, "viewer-pod")


def test_the_lead_gets_the_portals_team_roles_and_the_team_group_gets_the_viewers(
    two_teams, core, kube_cluster, as_identity
):
    a, _ = two_teams
    rbac = client.RbacAuthorizationV1Api(core.api_client)

    bindings = {b.role_ref.name: b for b in rbac.list_namespaced_role_binding(a.slug).items}

    lead = f"portal:lead-{a.slug}"
    assert [s.name for s in bindings["gpu-portal-lead"].subjects] == [lead]
    assert [s.name for s in bindings["gpu-portal-member"].subjects] == [lead]
    assert [(s.kind, s.name) for s in bindings["gpu-portal-viewer"].subjects] == [
        ("User", lead),
        ("Group", f"portal:team:{a.slug}"),
    ]
    in_group = as_identity("someone-in-the-team-group", groups=[f"portal:team:{a.slug}"])
    assert in_group.list_namespaced_pod(a.slug).items is not None
    assert not can_create_pod(in_group, a.slug, "group-pod")


def test_leaving_the_providers_group_removes_the_right_at_the_next_sign_in(
    two_teams, core, settings, as_identity
):
    """Single sign-on's group sync goes through the same reconcile as an admin's change."""
    a, _ = two_teams
    settings.OIDC_GROUP_MAPPING = {"gpu-a-members": {"team": a.slug, "role": "member"}}
    claims = {"sub": "sub-sam", "preferred_username": "sso-sam", "groups": ["gpu-a-members"]}
    sso.sso_sign_in(claims=claims)
    sam_api = as_identity("portal:sso-sam")
    wait_for(lambda: can_create_pod(sam_api, a.slug, "first"), what="sam's edit binding")

    sso.sso_sign_in(claims={**claims, "groups": []})

    attempts = itertools.count()
    wait_for(
        lambda: not can_create_pod(sam_api, a.slug, f"again-{next(attempts)}"),
        what="sam's right to go",
    )
    bindings = client.RbacAuthorizationV1Api(core.api_client).list_namespaced_role_binding(a.slug)
    assert "portal:sso-sam" not in [s.name for b in bindings.items for s in b.subjects or []]
