"""Single sign-on through a real Keycloak: the authorization-code round trip with a plain HTTP
client following redirects (Keycloak's own login form), group sync at each sign-in, and what a
change at the provider does at the next one."""

import re
import time

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models import OidcIdentity
from tenants.models import AuditEvent, Membership, TeamCluster
from tests import factories
from tests.conftest import SSO_REALM
from tests.sso import keycloak_sign_in

pytestmark = pytest.mark.django_db(transaction=True)

Action = AuditEvent.Action


@pytest.fixture
def teams(db):
    return {
        slug: factories.TeamFactory(slug=slug, name=slug.capitalize()) for slug in ("vision", "nlp")
    }


def signed_in_as(answer) -> str | None:
    found = re.search(r'data-testid="username">([^<]+)<', answer.text)
    return found.group(1) if found else None


def roles_of(username: str) -> dict[str, str]:
    return dict(
        Membership.objects.filter(user__username=username).values_list("team__slug", "role")
    )


def test_lead_signs_in_through_keycloak_and_gets_their_teams(single_sign_on, live_server, teams):
    answer = keycloak_sign_in(live_server.url, "lena", "lena-password", next_path="/")

    assert answer.url == f"{live_server.url}/"
    assert signed_in_as(answer) == "lena"
    # The session lasts OIDC_SIGN_IN_MAX_AGE_HOURS (24), not Django's two weeks.
    (session_cookie,) = [c for c in answer.session.cookies if c.name == "sessionid"]
    assert 23 * 3600 < session_cookie.expires - time.time() <= 24 * 3600
    assert roles_of("lena") == {"vision": "lead", "nlp": "member"}
    lena = User.objects.get(username="lena")
    assert not lena.has_usable_password()
    assert (lena.email, lena.first_name, lena.is_staff) == ("lena@example.org", "Lena", False)
    identity = OidcIdentity.objects.get(user=lena)
    assert sorted(identity.groups) == ["gpu-nlp-members", "gpu-vision-leads"]
    events = AuditEvent.objects.filter(action=Action.MEMBERSHIP_SET, target_type="Membership")
    assert sorted((e.team.slug, e.after["role"], e.actor, e.note) for e in events) == [
        ("nlp", "member", None, "Single sign-on: group 'gpu-nlp-members'"),
        ("vision", "lead", None, "Single sign-on: group 'gpu-vision-leads'"),
    ]


def test_signing_in_again_changes_nothing_when_the_groups_did_not(
    single_sign_on, live_server, teams
):
    keycloak_sign_in(live_server.url, "lena", "lena-password")
    events = AuditEvent.objects.count()

    answer = keycloak_sign_in(live_server.url, "lena", "lena-password")

    assert signed_in_as(answer) == "lena"
    assert AuditEvent.objects.count() == events
    assert User.objects.filter(username="lena").count() == 1


def test_removed_from_a_group_at_the_provider_loses_the_membership_at_next_sign_in(
    single_sign_on, live_server, teams, cluster
):
    keycloak = single_sign_on
    keycloak.add_user(SSO_REALM, "rita", "rita-password", ["gpu-vision-leads", "gpu-nlp-members"])
    keycloak_sign_in(live_server.url, "rita", "rita-password")
    assert roles_of("rita") == {"vision": "lead", "nlp": "member"}
    # Vision is on a cluster: losing a member there must bring its RoleBindings in line.
    on_cluster = factories.TeamClusterFactory(team=teams["vision"], cluster=cluster)
    TeamCluster.objects.filter(pk=on_cluster.pk).update(status=TeamCluster.Status.IN_SYNC)

    keycloak.set_user_group(SSO_REALM, "rita", "gpu-vision-leads", member=False)
    asked_from = timezone.now()
    answer = keycloak_sign_in(live_server.url, "rita", "rita-password")

    assert signed_in_as(answer) == "rita"
    assert roles_of("rita") == {"nlp": "member"}
    removed = AuditEvent.objects.get(action=Action.MEMBERSHIP_REMOVED)
    assert (removed.team.slug, removed.before["role"], removed.after) == ("vision", "lead", None)
    assert removed.note == "Single sign-on: in no group of vision"
    # The sign-in asked for a reconcile (a worker of the session may have run it since, so its
    # status is not checked here; tests/integration/reconcile shows the RoleBinding go).
    on_cluster.refresh_from_db()
    assert on_cluster.reconcile_requested_at >= asked_from


def test_admin_group_makes_a_portal_admin_and_leaving_it_unmakes_one(
    single_sign_on, live_server, teams
):
    keycloak = single_sign_on
    keycloak.add_user(SSO_REALM, "greta", "greta-password", ["gpu-admins"])

    answer = keycloak_sign_in(live_server.url, "greta", "greta-password")

    assert 'class="badge badge-admin"' in answer.text
    assert User.objects.get(username="greta").is_staff
    granted = AuditEvent.objects.get(action=Action.USER_ADMIN_GRANTED)
    assert (granted.before, granted.after) == (
        {"is_staff": False, "is_superuser": False},
        {"is_staff": True, "is_superuser": False},
    )

    keycloak.set_user_group(SSO_REALM, "greta", "gpu-admins", member=False)
    keycloak_sign_in(live_server.url, "greta", "greta-password")

    assert not User.objects.get(username="greta").is_staff
    assert AuditEvent.objects.filter(action=Action.USER_ADMIN_REVOKED).count() == 1


def test_mapping_entry_for_an_unknown_team_is_skipped_and_audited(
    single_sign_on, live_server, teams
):
    keycloak = single_sign_on
    keycloak.add_user(SSO_REALM, "gus", "gus-password", ["gpu-ghost-members", "gpu-vision-members"])

    answer = keycloak_sign_in(live_server.url, "gus", "gus-password")

    assert answer.status_code == 200
    assert signed_in_as(answer) == "gus"
    assert roles_of("gus") == {"vision": "member"}
    skipped = AuditEvent.objects.get(action=Action.GROUP_SYNC_ENTRY_SKIPPED)
    assert skipped.after == {"group": "gpu-ghost-members", "team": "ghost"}
    assert "team 'ghost', which does not exist" in skipped.note


def test_malformed_groups_claim_refuses_the_sign_in_and_changes_nothing(
    single_sign_on, live_server, teams, settings
):
    keycloak = single_sign_on
    keycloak.add_user(SSO_REALM, "mal", "mal-password", ["gpu-vision-leads"])
    # This client's mapper sends "groups": "gpu-vision-leads", a string, not a list.
    settings.OIDC_RP_CLIENT_ID = "gpu-portal-malformed-groups"

    answer = keycloak_sign_in(live_server.url, "mal", "mal-password")

    assert answer.url.startswith(f"{live_server.url}/login/")
    assert signed_in_as(answer) is None
    assert "Sign-in refused: the groups claim is a str, not a list of group names" in answer.text
    assert not User.objects.filter(username="mal").exists()
    assert not Membership.objects.exists()
    assert not AuditEvent.objects.exists()


def test_an_account_with_a_password_is_not_taken_over_by_the_providers_user(
    single_sign_on, live_server, teams
):
    """Break-glass and other local accounts keep signing in with their password only."""
    local = factories.UserFactory(username="ada")  # Keycloak also has an "ada", in gpu-admins

    answer = keycloak_sign_in(live_server.url, "ada", "ada-password")

    assert signed_in_as(answer) is None
    assert "was not made by single sign-on" in answer.text
    local.refresh_from_db()
    assert not local.is_staff
    assert not OidcIdentity.objects.exists()
