"""A team's slug is its namespace: Kubernetes' own and the portal's namespaces are never a team's,
and the slug is fixed once the team has a namespace. Usernames that cannot be cluster
identities are never members."""

import pytest
from django.core.exceptions import ValidationError

from tenants import services
from tenants.models import AuditEvent, Membership, Team, TeamCluster
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("slug", ["default", "kube-system", "kube-public", "kube-anything"])
def test_kubernetes_own_namespaces_are_refused_as_team_slugs(api, admin, slug):
    response = api.as_user(admin).post("/api/v1/teams/", {"slug": slug, "name": "Sneaky"})

    assert response.status_code == 400
    assert "one of Kubernetes' own namespaces" in response.data["slug"][0]
    assert not Team.objects.filter(slug=slug).exists()


def test_the_portals_own_namespace_is_refused_as_a_team_slug(api, admin, settings):
    settings.PORTAL_NAMESPACE = "gpus-system"

    response = api.as_user(admin).post("/api/v1/teams/", {"slug": "gpus-system", "name": "X"})

    assert response.status_code == 400
    assert "the namespace the portal itself runs in" in response.data["slug"][0]


def test_a_slug_that_only_looks_reserved_is_fine(api, admin):
    response = api.as_user(admin).post("/api/v1/teams/", {"slug": "kubeflow", "name": "Kf"})

    assert response.status_code == 201


def test_a_team_without_a_namespace_may_be_renamed_and_it_is_audited(admin):
    team = factories.TeamFactory(slug="draft")

    services.team_update(actor=admin, team=team, slug="vision-2", name="Vision 2")

    team.refresh_from_db()
    assert (team.slug, team.name) == ("vision-2", "Vision 2")
    event = AuditEvent.objects.get(action=AuditEvent.Action.TEAM_UPDATED)
    assert (event.before["slug"], event.after["slug"]) == ("draft", "vision-2")


def test_a_team_with_a_namespace_keeps_its_slug(admin, team, cluster):
    TeamCluster.objects.create(team=team, cluster=cluster)

    with pytest.raises(ValidationError) as refused:
        services.team_update(actor=admin, team=team, slug="vision-2")

    assert "its slug cannot change" in refused.value.message_dict["slug"][0]
    team.refresh_from_db()
    assert team.slug == "vision"


def test_a_team_with_a_namespace_may_still_change_its_name(admin, team, cluster):
    TeamCluster.objects.create(team=team, cluster=cluster)

    services.team_update(actor=admin, team=team, name="Computer Vision")

    team.refresh_from_db()
    assert (team.slug, team.name) == ("vision", "Computer Vision")


# --- usernames ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("username", "fragment"),
    [
        ("system:masters", "which Kubernetes keeps for itself"),
        ("team:vision", "has a ':'"),
        ("lena smith", "spaces or control characters"),
    ],
)
def test_a_username_that_cannot_be_a_cluster_identity_is_never_made_a_member(
    api, admin, team, username, fragment
):
    # Django's own forms refuse these; a user made another way (a script, single sign-on) is
    # still refused here.
    factories.UserFactory(username=username)

    response = api.as_user(admin).post(
        "/api/v1/teams/vision/members/", {"username": username, "role": "member"}
    )

    assert response.status_code == 400
    assert fragment in response.data["username"][0]
    assert not Membership.objects.filter(team=team, user__username=username).exists()
