"""Single sign-on in a real browser: from the portal's sign-in page to Keycloak's login form and
back, signed in, as a user whose provider groups make them a team lead."""

import re

import pytest
from playwright.sync_api import expect

from tenants.models import Membership
from tests import factories
from tests.conftest import SSO_REALM

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_provider_group_lead_signs_in_through_keycloak_and_leads_the_team(
    single_sign_on, new_page, live_server, screenshot
):
    keycloak = single_sign_on
    factories.TeamFactory(slug="vision", name="Vision")
    keycloak.add_user(SSO_REALM, "bruno", "bruno-password", ["gpu-vision-leads"])

    page = new_page()
    page.goto("/teams/vision/")  # signed out: sent to sign in, and back here afterwards
    expect(page).to_have_url(re.compile(r"/login/\?next=/teams/vision/$"))
    page.get_by_role("link", name="Sign in with Keycloak").click()

    expect(page).to_have_url(re.compile(rf"^{re.escape(keycloak.url)}/realms/{SSO_REALM}/"))
    page.get_by_label("Username").fill("bruno")
    page.get_by_label("Password", exact=True).fill("bruno-password")
    screenshot(page, "sso-keycloak-login")
    page.get_by_role("button", name="Sign In").click()

    expect(page).to_have_url(f"{live_server.url}/teams/vision/")
    expect(page.get_by_test_id("username")).to_have_text("bruno")
    expect(page.get_by_text("you are lead")).to_be_visible()
    expect(page.get_by_role("link", name="Request quota")).to_be_visible()
    screenshot(page, "sso-signed-in-lead")
    assert Membership.objects.get(user__username="bruno").role == Membership.Role.LEAD
