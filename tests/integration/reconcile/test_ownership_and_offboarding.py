"""The portal never takes over what it did not create; archiving a team takes away its access
and quota; deleting its namespace needs the admin to type the team's slug."""

import pytest
from django.core.exceptions import ValidationError
from kubernetes import client

from clusters.kube import NotOwned
from reconcile import team_pass
from tenants import services
from tenants.models import Membership, QuotaGrant, TeamCluster
from tests import factories
from tests.integration.conftest import wait_for

from .conftest import (
    in_sync,
    quota_hard,
    read_or_none,
    wait_for_gpu_quota,
    wait_for_state,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.devcluster]


def portal_bindings(core, namespace):
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    return rbac.list_namespaced_role_binding(
        namespace, label_selector="app.kubernetes.io/managed-by=gpu-portal"
    ).items


def test_a_namespace_someone_else_made_is_reported_on_the_team_and_left_alone(
    celery_worker_process, core, kube_cluster, make_team, approve, api, client_as
):
    team = make_team("taken")
    core.create_namespace({"metadata": {"name": team.slug, "labels": {"owner": "data-eng"}}})

    approve(team, kube_cluster, gpus=4)

    state = wait_for_state(
        team,
        kube_cluster,
        lambda s: s.status == TeamCluster.Status.ERROR,
        what="the error on the team",
    )
    assert f"Namespace {team.slug} already exists on cluster dev" in state.last_error
    assert "not created by the portal" in state.last_error
    assert state.namespace_owned is False  # nothing is read from it or run in it as the team's
    assert core.read_namespace(team.slug).metadata.labels == {
        "owner": "data-eng",
        "kubernetes.io/metadata.name": team.slug,
    }
    assert quota_hard(core, team.slug) is None
    lead = team.memberships.get(role=Membership.Role.LEAD).user
    (shown,) = api.as_user(lead).get(f"/api/v1/teams/{team.slug}/clusters/").json()["results"]
    assert (shown["status"], shown["in_sync"]) == ("error", False)
    assert shown["last_error"] == state.last_error
    html = client_as(lead).get(f"/teams/{team.slug}/").content.decode()
    assert "not created by the portal" in html


def test_an_object_someone_else_made_under_a_portal_name_is_reported_and_left_alone(
    celery_worker_process, core, kube_cluster, make_team, approve
):
    team = make_team("squatted")
    approve(team, kube_cluster, gpus=4)
    in_sync(team, kube_cluster)
    core.delete_namespaced_resource_quota("gpu-portal-quota", team.slug)
    theirs = {"metadata": {"name": "gpu-portal-quota"}, "spec": {"hard": {"pods": "7"}}}
    core.create_namespaced_resource_quota(team.slug, theirs)

    with pytest.raises(NotOwned):
        team_pass.reconcile_team_on_cluster(team_id=team.pk, cluster_id=kube_cluster.pk)

    state = TeamCluster.objects.get(team=team, cluster=kube_cluster)
    assert state.status == TeamCluster.Status.ERROR
    assert state.namespace_owned is True  # the namespace itself is still the portal's
    assert "ResourceQuota gpu-portal-quota in namespace" in state.last_error
    assert "not created by the portal" in state.last_error
    assert quota_hard(core, team.slug) == {"pods": "7"}


def test_archiving_a_team_removes_its_bindings_and_quota_and_keeps_the_namespace(
    celery_worker_process, core, kube_cluster, make_team, approve, admin_user, api
):
    team = make_team("leaving")
    grant = approve(team, kube_cluster, gpus=4)
    mo = factories.UserFactory(username="mo-member")
    services.membership_set(actor=admin_user, team=team, user=mo, role=Membership.Role.MEMBER)
    wait_for_gpu_quota(core, team.slug, "4")
    wait_for(lambda: len(portal_bindings(core, team.slug)) == 3, what="three bindings")

    response = api.as_user(admin_user).post(
        f"/api/v1/teams/{team.slug}/archive/", {"note": "Done."}
    )

    assert response.status_code == 200
    assert response.json()["archived_at"] is not None
    wait_for(lambda: portal_bindings(core, team.slug) == [], what="the bindings to go")
    hard = wait_for_gpu_quota(core, team.slug, "0")
    assert hard["pods"] == "0"
    assert core.read_namespace(team.slug).status.phase == "Active"
    grant.refresh_from_db()
    assert grant.state == QuotaGrant.State.REVOKED
    assert in_sync(team, kube_cluster).applied_quota["pods"] == "0"


def test_deleting_an_archived_team_namespace_needs_its_slug_typed(
    celery_worker_process, core, kube_cluster, make_team, approve, admin_user, api
):
    team = make_team("gone")
    approve(team, kube_cluster, gpus=1)
    wait_for_gpu_quota(core, team.slug, "1")
    services.team_archive(actor=admin_user, team=team)
    url = f"/api/v1/teams/{team.slug}/clusters/dev/delete-namespace/"

    wrong = api.as_user(admin_user).post(url, {"confirm": "yes"})

    assert wrong.status_code == 400
    assert wrong.json()["confirm"] == [
        f"Type the team's slug, {team.slug}, to confirm deleting its namespace."
    ]
    assert TeamCluster.objects.get(team=team).namespace_delete_requested_at is None

    right = api.as_user(admin_user).post(url, {"confirm": team.slug})

    assert right.status_code == 200
    assert TeamCluster.objects.get(team=team).namespace_owned is True
    state = wait_for_state(
        team,
        kube_cluster,
        lambda s: s.status == TeamCluster.Status.DELETED,
        what="the namespace to be deleted",
    )
    assert state.namespace_deleted_at is not None
    assert state.namespace_owned is None  # whoever makes it again, it is not known as the team's
    wait_for(
        lambda: (
            (ns := read_or_none(core.read_namespace, team.slug)) is None
            or ns.metadata.deletion_timestamp is not None
        ),
        what="the namespace to be deleted on the cluster",
    )


def test_a_team_that_is_not_archived_keeps_its_namespace(kube_cluster, make_team, admin_user):
    team = make_team("active")
    factories.TeamClusterFactory(team=team, cluster=kube_cluster)

    with pytest.raises(ValidationError, match="Archive team"):
        services.team_namespace_delete(
            actor=admin_user, team=team, cluster=kube_cluster, confirm=team.slug
        )


def test_only_admins_archive_teams(kube_cluster, make_team, approve, api):
    team = make_team("kept")
    lead = factories.UserFactory(username="lena-lead")
    factories.MembershipFactory(team=team, user=lead, role=Membership.Role.LEAD)

    response = api.as_user(lead).post(f"/api/v1/teams/{team.slug}/archive/", {})

    assert response.status_code == 403
    assert response.json()["detail"] == "Only portal admins can archive teams."


def test_the_admin_archives_from_the_team_page(kube_cluster, make_team, admin_user, client_as):
    team = make_team("paged")
    page = client_as(admin_user)
    assert 'data-testid="archive-team"' in page.get(f"/teams/{team.slug}/").content.decode()

    response = page.post(f"/teams/{team.slug}/archive/", follow=True)

    assert response.redirect_chain == [(f"/teams/{team.slug}/", 302)]
    html = response.content.decode()
    assert f"Archived team {team.slug}" in html
    assert 'data-testid="archived"' in html
    assert 'data-testid="archive-team"' not in html


def test_a_namespace_the_cluster_reserves_later_is_never_made_for_the_team(
    celery_worker_process, core, kube_cluster, make_team, approve
):
    team = make_team("later")
    kube_cluster.reserved_namespaces = [*kube_cluster.reserved_namespaces, team.slug]
    kube_cluster.save(update_fields=["reserved_namespaces"])

    approve(team, kube_cluster, gpus=4)

    state = wait_for_state(
        team,
        kube_cluster,
        lambda s: s.status == TeamCluster.Status.ERROR,
        what="the error on the team",
    )
    assert f"Namespace {team.slug} is reserved on cluster dev" in state.last_error
    assert read_or_none(core.read_namespace, team.slug) is None
