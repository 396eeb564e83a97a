"""The Django admin changes teams, memberships, users and clusters through the services: a
team's slug is fixed once it has a namespace, every change is audited, and access on the
clusters follows at once (a deactivated user's bindings, a cluster's admission policies)."""

import pytest
from django.contrib.auth.models import User
from django.forms.models import model_to_dict

from tenants.models import AuditEvent, ClusterState, Membership, Team, TeamCluster
from tests import factories
from tests.integration.pages.helpers import cluster_change_form

pytestmark = pytest.mark.django_db

MEMBERSHIPS = {
    "memberships-TOTAL_FORMS": "0",
    "memberships-INITIAL_FORMS": "0",
    "memberships-MIN_NUM_FORMS": "0",
    "memberships-MAX_NUM_FORMS": "1000",
}


@pytest.fixture
def superuser(db):
    return factories.AdminFactory(username="root-admin", is_superuser=True)


def team_url(team):
    return f"/django-admin/tenants/team/{team.pk}/change/"


def team_form(team, *members) -> dict:
    """The team's change form, unchanged, with a new membership row per (user, role)."""
    data = {"slug": team.slug, "name": team.name, "description": "", **MEMBERSHIPS}
    data["memberships-TOTAL_FORMS"] = str(len(members))
    for index, (user, role) in enumerate(members):
        data[f"memberships-{index}-user"] = str(user.pk)
        data[f"memberships-{index}-role"] = role
        data[f"memberships-{index}-team"] = str(team.pk)
    return data


# --- teams -------------------------------------------------------------------------------------


def test_a_teams_slug_cannot_change_in_the_admin_once_it_has_a_namespace(
    client_as, superuser, team, cluster
):
    TeamCluster.objects.create(team=team, cluster=cluster)

    response = client_as(superuser).post(
        team_url(team), {"slug": "renamed", "name": "Vision", "description": "", **MEMBERSHIPS}
    )

    assert response.status_code == 302
    team.refresh_from_db()
    assert team.slug == "vision"
    assert "slug" not in client_as(superuser).get(team_url(team)).context["adminform"].form.fields


def test_an_admin_edit_of_a_team_is_audited(client_as, superuser, team):
    response = client_as(superuser).post(
        team_url(team),
        {"slug": "vision", "name": "Computer Vision", "description": "", **MEMBERSHIPS},
    )

    assert response.status_code == 302
    event = AuditEvent.objects.get(action=AuditEvent.Action.TEAM_UPDATED)
    assert (event.actor, event.before["name"], event.after["name"]) == (
        superuser,
        "Vision",
        "Computer Vision",
    )


def test_a_reserved_slug_is_a_form_error_in_the_admin(client_as, superuser):
    response = client_as(superuser).post(
        "/django-admin/tenants/team/add/",
        {"slug": "kube-system", "name": "Sneaky", "description": "", **MEMBERSHIPS},
    )

    assert response.status_code == 200
    assert (
        "one of Kubernetes' own namespaces" in response.context["adminform"].form.errors["slug"][0]
    )
    assert not Team.objects.filter(slug="kube-system").exists()


def test_a_slug_a_cluster_reserves_is_a_form_error_in_the_admin(client_as, superuser, cluster):
    response = client_as(superuser).post(
        "/django-admin/tenants/team/add/",
        {"slug": "gpu-operator", "name": "Sneaky", "description": "", **MEMBERSHIPS},
    )

    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["slug"]
    assert f"the namespace of a cluster component on {cluster.name}" in error
    assert not Team.objects.filter(slug="gpu-operator").exists()


def test_a_membership_added_in_the_admin_goes_through_the_service(
    client_as, superuser, team, cluster
):
    TeamCluster.objects.create(team=team, cluster=cluster)
    mo = factories.UserFactory(username="mo")

    response = client_as(superuser).post(team_url(team), team_form(team, (mo, "member")))

    assert response.status_code == 302
    assert Membership.objects.get(team=team, user=mo).role == "member"
    assert AuditEvent.objects.filter(action=AuditEvent.Action.MEMBERSHIP_SET).exists()
    assert TeamCluster.objects.get(team=team, cluster=cluster).reconcile_requested_at


def test_a_user_that_cannot_be_a_cluster_identity_cannot_be_added_in_the_admin(
    client_as, superuser, team
):
    odd = factories.UserFactory(username="system:odd")

    response = client_as(superuser).post(team_url(team), team_form(team, (odd, "member")))

    assert response.status_code == 200
    assert "which Kubernetes keeps for itself" in str(response.content)
    assert not Membership.objects.filter(user=odd).exists()


# --- users -------------------------------------------------------------------------------------


def user_form(user, **changes) -> dict:
    data = {
        key: value
        for key, value in model_to_dict(user).items()
        if key in ("username", "first_name", "last_name", "email")
    }
    data.update(
        {
            "is_active": "on" if user.is_active else "",
            "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        }
    )
    data.update(changes)
    return {key: value for key, value in data.items() if value not in ("", None)}


def test_deactivating_a_user_in_the_admin_is_audited_and_reaches_their_teams(
    client_as, superuser, member, team, cluster
):
    TeamCluster.objects.create(team=team, cluster=cluster)

    response = client_as(superuser).post(
        f"/django-admin/auth/user/{member.pk}/change/", user_form(member, is_active="")
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert not User.objects.get(pk=member.pk).is_active
    event = AuditEvent.objects.get(action=AuditEvent.Action.USER_DEACTIVATED)
    assert (event.before["is_active"], event.after["is_active"]) == (True, False)
    assert TeamCluster.objects.get(team=team, cluster=cluster).status == "pending"


def test_a_username_that_cannot_be_a_cluster_identity_is_refused_in_the_admin(client_as, superuser):
    response = client_as(superuser).post(
        "/django-admin/auth/user/add/",
        {"username": "system:node:x", "usable_password": "false"},
    )

    assert response.status_code == 200
    assert "username" in response.context["adminform"].form.errors
    assert not User.objects.filter(username="system:node:x").exists()


# --- clusters ----------------------------------------------------------------------------------


def test_a_cluster_settings_change_is_audited_and_reaches_the_cluster(
    client_as, superuser, cluster, team
):
    TeamCluster.objects.create(team=team, cluster=cluster)
    url = f"/django-admin/clusters/cluster/{cluster.pk}/change/"

    response = client_as(superuser).post(
        url,
        cluster_change_form(
            cluster,
            allowed_registries='["registry.example.com"]',
            pod_security_level="restricted",
        ),
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    event = AuditEvent.objects.get(action=AuditEvent.Action.CLUSTER_SETTINGS_CHANGED)
    assert (event.before["pod_security_level"], event.after["pod_security_level"]) == (
        "baseline",
        "restricted",
    )
    assert event.after["allowed_registries"] == ["registry.example.com"]
    assert ClusterState.objects.get(cluster=cluster).status == "pending"
    assert TeamCluster.objects.get(team=team, cluster=cluster).status == "pending"


@pytest.mark.parametrize(
    "entry",
    ["busybox", "team/trainer", "https://registry.example.com", "registry.example.com/Team"],
)
def test_an_allowed_registry_that_names_no_registry_is_a_form_error(
    client_as, superuser, cluster, entry
):
    url = f"/django-admin/clusters/cluster/{cluster.pk}/change/"

    response = client_as(superuser).post(
        url, cluster_change_form(cluster, allowed_registries=f'["{entry}"]')
    )

    assert response.status_code == 200
    assert "Not a registry" in response.context["adminform"].form.errors["allowed_registries"][0]
