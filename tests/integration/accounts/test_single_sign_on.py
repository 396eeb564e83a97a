"""Single sign-on without the provider: what the portal does with the claims it is handed
(``accounts.sso``), the group mapping's system check, the stale sign-in sync, and the pages.
The round trip through a real provider is tests/integration/sso and tests/e2e."""

import datetime

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.utils import timezone

from accounts import sso
from accounts.checks import check_group_mapping
from accounts.models import OidcIdentity
from tenants.models import AuditEvent, Membership, TeamCluster
from tests import factories
from tests.conftest import SSO_GROUP_MAPPING

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


@pytest.fixture
def mapping(settings):
    settings.OIDC_GROUP_MAPPING = SSO_GROUP_MAPPING
    factories.TeamFactory(slug="vision")
    factories.TeamFactory(slug="nlp")
    return SSO_GROUP_MAPPING


def claims(username="lena", groups=None, sub=None, **more):
    return {
        "sub": sub or f"sub-{username}",
        "preferred_username": username,
        "email": f"{username}@example.org",
        "groups": ["gpu-vision-leads"] if groups is None else groups,
        **more,
    }


def roles_of(user) -> dict[str, str]:
    return dict(Membership.objects.filter(user=user).values_list("team__slug", "role"))


def test_first_sign_in_creates_a_user_without_password_and_applies_the_groups(mapping):
    user = sso.sso_sign_in(claims=claims(groups=["gpu-vision-leads", "gpu-nlp-members"]))

    assert user.username == "lena"
    assert not user.has_usable_password()
    assert roles_of(user) == {"vision": "lead", "nlp": "member"}
    assert user.oidc_identity.subject == "sub-lena"
    assert AuditEvent.objects.filter(action=Action.MEMBERSHIP_SET, actor=None).count() == 2


def test_a_role_change_at_the_provider_changes_the_role(mapping):
    user = sso.sso_sign_in(claims=claims(groups=["gpu-vision-members"]))
    assert roles_of(user) == {"vision": "member"}

    sso.sso_sign_in(claims=claims(groups=["gpu-vision-leads"]))

    assert roles_of(user) == {"vision": "lead"}
    event = AuditEvent.objects.filter(action=Action.MEMBERSHIP_SET).first()
    assert (event.before["role"], event.after["role"]) == ("member", "lead")


def test_memberships_in_teams_the_mapping_does_not_name_are_left_alone(mapping):
    speech = factories.TeamFactory(slug="speech")
    user = sso.sso_sign_in(claims=claims())
    factories.MembershipFactory(team=speech, user=user, role="viewer")

    sso.sso_sign_in(claims=claims(groups=[]))

    assert roles_of(user) == {"speech": "viewer"}


def test_sign_in_is_matched_by_subject_even_when_the_username_changed(mapping):
    user = sso.sso_sign_in(claims=claims())
    again = sso.sso_sign_in(claims=claims(username="lena2", sub="sub-lena"))
    assert again.pk == user.pk
    assert User.objects.count() == 1


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ("gpu-vision-leads", "the groups claim is a str, not a list of group names"),
        (["gpu-vision-leads", 7], "the groups claim holds 7"),
        ({"vision": "lead"}, "the groups claim is a dict"),
    ],
)
def test_malformed_groups_claim_refuses_the_sign_in_and_changes_nothing(mapping, groups, message):
    user = sso.sso_sign_in(claims=claims(groups=["gpu-vision-leads"]))
    before = AuditEvent.objects.count()

    with pytest.raises(sso.SignInRefused) as refusal:
        sso.sso_sign_in(claims=claims(groups=groups))

    assert message in str(refusal.value)
    assert "Nothing was changed" in str(refusal.value)
    assert roles_of(user) == {"vision": "lead"}
    assert AuditEvent.objects.count() == before


def test_malformed_groups_claim_at_first_sign_in_creates_no_user(mapping):
    with pytest.raises(sso.SignInRefused):
        sso.sso_sign_in(claims=claims(groups="gpu-vision-leads"))
    assert not User.objects.exists()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"sub": ""}, "no usable 'sub' claim"),
        ({"preferred_username": None}, "no username"),
        ({"preferred_username": "team:vision"}, "cannot be used here"),
    ],
)
def test_claims_that_cannot_name_a_user_are_refused(mapping, bad, message):
    with pytest.raises(sso.SignInRefused) as refusal:
        sso.sso_sign_in(claims={**claims(), **bad})
    assert message in str(refusal.value)
    assert not User.objects.exists()


def test_a_malformed_mapping_refuses_the_sign_in_naming_the_entry(mapping, settings):
    settings.OIDC_GROUP_MAPPING = {"gpu-vision-leads": {"team": "vision", "role": "boss"}}
    with pytest.raises(sso.SignInRefused) as refusal:
        sso.sso_sign_in(claims=claims())
    assert "OIDC_GROUP_MAPPING['gpu-vision-leads']: role 'boss'" in str(refusal.value)
    assert not User.objects.exists()


def test_unknown_team_is_skipped_audited_and_the_rest_applies(mapping, caplog):
    user = sso.sso_sign_in(claims=claims(groups=["gpu-ghost-members", "gpu-nlp-members"]))

    assert roles_of(user) == {"nlp": "member"}
    skipped = AuditEvent.objects.get(action=Action.GROUP_SYNC_ENTRY_SKIPPED)
    assert skipped.target_id == user.pk
    assert skipped.after == {"group": "gpu-ghost-members", "team": "ghost"}
    assert "team 'ghost', which does not exist" in caplog.text


def test_archived_team_counts_as_unknown(mapping):
    factories.TeamFactory(slug="ghost", archived_at=timezone.now())
    user = sso.sso_sign_in(claims=claims(groups=["gpu-ghost-members"]))
    assert roles_of(user) == {}
    assert AuditEvent.objects.filter(action=Action.GROUP_SYNC_ENTRY_SKIPPED).exists()


def test_a_password_account_of_the_same_name_is_not_taken_over(mapping):
    local = factories.UserFactory(username="lena")
    with pytest.raises(sso.SignInRefused) as refusal:
        sso.sso_sign_in(claims=claims())
    assert "was not made by single sign-on" in str(refusal.value)
    assert roles_of(local) == {}
    assert not OidcIdentity.objects.exists()


def test_an_account_without_password_is_not_linked_by_its_username_either(mapping):
    existing = User.objects.create_user("lena")  # no password, but not made by single sign-on

    with pytest.raises(sso.SignInRefused, match="ask an admin to rename or delete it"):
        sso.sso_sign_in(claims=claims())
    assert roles_of(existing) == {}
    assert not OidcIdentity.objects.exists()


def test_an_account_made_by_single_sign_on_is_linked_by_its_subject_only(mapping):
    first = sso.sso_sign_in(claims=claims(groups=[]))

    assert sso.sso_sign_in(claims=claims(groups=[])).pk == first.pk
    with pytest.raises(sso.SignInRefused, match="belongs to another single sign-on account"):
        sso.sso_sign_in(claims={**claims(groups=[]), "sub": "someone-else"})


def test_a_deactivated_user_is_refused(mapping):
    user = sso.sso_sign_in(claims=claims())
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(sso.SignInRefused, match="deactivated"):
        sso.sso_sign_in(claims=claims(groups=[]))
    assert roles_of(user) == {"vision": "lead"}


def test_a_sync_that_leaves_a_user_in_no_team_revokes_their_tokens(mapping):
    from accounts.models import ApiToken
    from accounts.services import api_token_create

    user = sso.sso_sign_in(claims=claims())
    api_token_create(user=user, name="ci")
    sso.sso_sign_in(claims=claims(groups=["gpu-vision-leads"]))  # still in the team
    assert ApiToken.objects.filter(user=user).count() == 1

    sso.sso_sign_in(claims=claims(groups=[]))

    assert roles_of(user) == {}
    assert not ApiToken.objects.filter(user=user).exists()


def test_admin_group_grants_and_revokes_portal_admin(mapping):
    user = sso.sso_sign_in(claims=claims(groups=["gpu-admins"]))
    assert user.is_staff

    User.objects.filter(pk=user.pk).update(is_superuser=True)
    sso.sso_sign_in(claims=claims(groups=[]))

    user.refresh_from_db()
    assert (user.is_staff, user.is_superuser) == (False, False)
    assert AuditEvent.objects.filter(action=Action.USER_ADMIN_REVOKED).count() == 1


def test_removing_a_member_asks_for_the_teams_reconcile(mapping, cluster):
    user = sso.sso_sign_in(claims=claims())
    state = factories.TeamClusterFactory(
        team=Membership.objects.get(user=user).team, cluster=cluster
    )
    TeamCluster.objects.filter(pk=state.pk).update(status=TeamCluster.Status.IN_SYNC)

    sso.sso_sign_in(claims=claims(groups=[]))

    state.refresh_from_db()
    assert state.status == TeamCluster.Status.PENDING


def test_stale_sign_ins_lose_what_their_groups_gave(mapping, settings):
    settings.OIDC_SIGN_IN_MAX_AGE_HOURS = 24
    stale = sso.sso_sign_in(claims=claims(groups=["gpu-vision-leads", "gpu-admins"]))
    fresh = sso.sso_sign_in(claims=claims(username="fred", groups=["gpu-nlp-members"]))
    OidcIdentity.objects.filter(user=stale).update(
        last_sign_in_at=timezone.now() - datetime.timedelta(hours=25)
    )

    assert sso.sso_expire_stale_sign_ins() == 1

    stale.refresh_from_db()
    assert roles_of(stale) == {}
    assert not stale.is_staff
    assert roles_of(fresh) == {"nlp": "member"}
    removed = AuditEvent.objects.get(action=Action.MEMBERSHIP_REMOVED)
    assert removed.note == "Sign-in older than 24 h: in no group of vision"
    assert sso.sso_expire_stale_sign_ins() == 0  # nothing left to take: a no-op


def test_system_check_names_the_malformed_mapping_entry(settings):
    settings.OIDC_GROUP_MAPPING = {"gpu-ok": {"admin": True}, "gpu-bad": {"team": "vision"}}
    (error,) = check_group_mapping(None)
    assert error.id == "accounts.E001"
    assert "OIDC_GROUP_MAPPING['gpu-bad']: 'team' needs a 'role'" in error.msg
    with pytest.raises(SystemCheckError, match="gpu-bad"):
        call_command("check")


def test_system_check_passes_a_good_mapping(settings):
    settings.OIDC_GROUP_MAPPING = SSO_GROUP_MAPPING
    assert check_group_mapping(None) == []


# --- the pages ---


def test_sign_in_page_offers_single_sign_on_when_it_is_on(client, settings):
    settings.OIDC_ENABLED = True
    settings.OIDC_PROVIDER_NAME = "Keycloak"
    page = client.get("/login/?next=/jobs/")
    assert b"Sign in with Keycloak" in page.content
    assert b'href="/oidc/authenticate/?next=/jobs/"' in page.content
    assert b'name="password"' in page.content  # break-glass accounts keep their form


def test_sign_in_page_has_no_single_sign_on_when_it_is_off(client, settings):
    settings.OIDC_ENABLED = False
    page = client.get("/login/")
    assert b"Sign in with" not in page.content
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404


def test_starting_single_sign_on_sends_the_browser_to_the_provider(client, settings):
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = "gpu-portal"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = "https://idp.example.org/auth"
    answer = client.get("/oidc/authenticate/?next=/jobs/")
    assert answer.status_code == 302
    assert answer["Location"].startswith("https://idp.example.org/auth?")
    assert "code_challenge_method=S256" in answer["Location"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("code=abc&state=never-issued", "did not complete"),
        ("error=access_denied&state=x", "did not complete (access_denied)"),
    ],
)
def test_a_spoilt_callback_lands_on_the_sign_in_page_saying_so(client, settings, query, message):
    settings.OIDC_ENABLED = True
    client.get("/login/")  # a session, as a browser that started signing in has
    session = client.session
    session["oidc_states"] = {"issued": {"nonce": "n", "code_verifier": None}}
    session.save()

    answer = client.get(f"/oidc/callback/?{query}")

    assert answer.status_code == 302
    assert answer["Location"] == "/login/"
    assert any(message in str(m) for m in get_messages(answer.wsgi_request))


def test_the_stale_sign_in_sync_is_a_scheduled_task(mapping, settings):
    from accounts import tasks
    from portal.celery import app

    app.loader.import_default_modules()
    entry = settings.CELERY_BEAT_SCHEDULE["expire-stale-sign-ins"]
    assert app.tasks[entry["task"]].name == tasks.expire_stale_sign_ins.name
    user = sso.sso_sign_in(claims=claims())
    OidcIdentity.objects.filter(user=user).update(
        last_sign_in_at=timezone.now() - datetime.timedelta(days=30)
    )

    assert tasks.expire_stale_sign_ins.apply().get() == 1
    assert roles_of(user) == {}


def test_a_linked_user_whose_username_no_cluster_can_name_is_refused_cleanly(mapping):
    user = sso.sso_sign_in(claims=claims(groups=[]))
    User.objects.filter(pk=user.pk).update(username="lena:renamed")  # by hand, say

    with pytest.raises(sso.SignInRefused, match="cannot be given access to a cluster"):
        sso.sso_sign_in(claims=claims())
    assert roles_of(user) == {}
