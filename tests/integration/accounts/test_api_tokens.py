"""API tokens: made by signing in through the API or on the "API tokens" page, stored only as
hashes, expiring, listed and revoked by their owner in the browser and the API."""

import datetime
import hashlib

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def sign_in(username: str, password: str = PASSWORD, **extra):
    return APIClient().post(
        "/api/v1/auth/token/", {"username": username, "password": password, **extra}, format="json"
    )


def client_with(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_signing_in_returns_a_token_with_its_expiry(lead, settings):
    settings.PORTAL_API_TOKEN_DAYS = 7

    response = sign_in("lena-lead")

    assert response.status_code == 200, response.data
    expiry = datetime.datetime.fromisoformat(response.data["expiry"])
    assert abs(expiry - (timezone.now() + datetime.timedelta(days=7))) < datetime.timedelta(
        minutes=1
    )
    assert response.data["token"].startswith("gpup_")
    assert response.data["token"].startswith(response.data["prefix"])


def test_only_a_hash_of_the_token_is_stored(lead):
    secret = sign_in("lena-lead").data["token"]

    (token,) = ApiToken.objects.filter(user=lead)

    assert secret not in {token.digest, token.token_key, token.name}
    assert token.digest == hashlib.sha512(secret.encode()).hexdigest()
    assert not ApiToken.objects.filter(digest=secret).exists()


def test_an_expired_token_no_longer_authenticates(lead):
    secret = sign_in("lena-lead").data["token"]
    ApiToken.objects.filter(user=lead).update(expiry=timezone.now() - datetime.timedelta(seconds=1))

    response = client_with(secret).get("/api/v1/me/")

    assert response.status_code == 401
    assert not ApiToken.objects.filter(user=lead).exists()  # deleted when met


def test_owner_lists_their_tokens_without_secrets_and_sees_last_use(lead, other_lead):
    secret = sign_in("lena-lead", name="laptop").data["token"]
    sign_in("otto-other-lead")

    response = client_with(secret).get("/api/v1/tokens/")

    assert response.status_code == 200
    (row,) = response.data["results"]
    assert row["name"] == "laptop"
    assert row["prefix"] == secret[: len(row["prefix"])]
    assert row["current"] is True
    assert row["last_used_at"] is not None  # this very call
    assert secret not in str(response.data)
    assert "digest" not in row


def test_revoked_token_stops_working_at_once(lead):
    first = sign_in("lena-lead").data
    second = sign_in("lena-lead").data

    revoked = client_with(first["token"]).delete(f"/api/v1/tokens/{second['id']}/")

    assert revoked.status_code == 204
    assert client_with(second["token"]).get("/api/v1/me/").status_code == 401
    assert client_with(first["token"]).get("/api/v1/me/").status_code == 200


def test_nobody_revokes_another_users_token(lead, other_lead):
    mine = sign_in("lena-lead").data
    theirs = sign_in("otto-other-lead").data

    response = client_with(mine["token"]).delete(f"/api/v1/tokens/{theirs['id']}/")

    assert response.status_code == 404
    assert client_with(theirs["token"]).get("/api/v1/me/").status_code == 200


def test_token_that_is_not_utf8_is_401_not_500():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=b"Token \xff\xfe-not-utf8".decode("latin-1"))

    assert client.get("/api/v1/me/").status_code == 401


def test_a_user_holds_a_bounded_number_of_tokens(lead, settings):
    settings.PORTAL_API_TOKENS_PER_USER = 2
    sign_in("lena-lead")
    sign_in("lena-lead")

    response = sign_in("lena-lead")

    assert response.status_code == 400
    assert "revoke one first" in response.data["non_field_errors"][0]
    assert ApiToken.objects.filter(user=lead).count() == 2


def test_a_read_only_token_reads_and_changes_nothing(lead):
    made = sign_in("lena-lead", name="dashboard", scope="read-only").data
    other = sign_in("lena-lead", name="ci").data
    client = client_with(made["token"])

    read = client.get("/api/v1/me/")
    write = client.post("/api/v1/quota-requests/", {}, format="json")
    revoke = client.delete(f"/api/v1/tokens/{other['id']}/")

    assert made["scope"] == "read-only"
    assert read.status_code == 200
    assert write.status_code == 403
    assert "This API token is read-only: it cannot POST" in write.data["detail"]
    assert revoke.status_code == 403
    assert ApiToken.objects.filter(pk=other["id"]).exists()
    listed = client.get("/api/v1/tokens/").data
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert {t["name"]: t["scope"] for t in rows} == {"dashboard": "read-only", "ci": "read-write"}


def test_a_token_of_an_unknown_scope_is_refused_naming_the_field(lead):
    response = sign_in("lena-lead", scope="admin")

    assert response.status_code == 400
    assert "scope" in response.data
    assert not ApiToken.objects.exists()


def test_deactivating_a_user_revokes_their_tokens_for_good(lead, admin):
    from tenants import services
    from tenants.audit import snapshot

    secret = sign_in("lena-lead").data["token"]
    before = snapshot(lead)
    lead.is_active = False
    lead.save()
    services.user_access_changed(actor=admin, user=lead, before=before)
    before = snapshot(lead)
    lead.is_active = True
    lead.save()
    services.user_access_changed(actor=admin, user=lead, before=before)

    assert not ApiToken.objects.filter(user=lead).exists()
    assert client_with(secret).get("/api/v1/me/").status_code == 401


# --- the page ------------------------------------------------------------------------------------


def test_page_makes_a_token_and_shows_it_once(client_as, lead):
    client = client_as(lead)

    made = client.post("/account/tokens/", {"name": "CI", "expires_in_days": "10"})
    secret = made.context["created"]["secret"]
    again = client.get("/account/tokens/")

    assert made.status_code == 200
    assert secret in made.content.decode()
    assert secret not in again.content.decode()
    assert "CI" in again.content.decode()
    assert client_with(secret).get("/api/v1/me/").data["username"] == "lena-lead"
    (token,) = ApiToken.objects.filter(user=lead)
    assert token.expiry - token.created == pytest.approx(
        datetime.timedelta(days=10), abs=datetime.timedelta(minutes=1)
    )


@pytest.mark.parametrize("days", ["0", "-1", "366", "99999999999999999999", "ten"])
def test_page_refuses_a_lifetime_out_of_range(client_as, lead, days):
    response = client_as(lead).post("/account/tokens/", {"expires_in_days": days})

    assert response.status_code == 200
    assert "expires_in_days" in response.context["form"].errors
    assert not ApiToken.objects.exists()


def test_page_lists_and_revokes_only_the_users_own_tokens(client_as, lead, other_lead):
    mine = sign_in("lena-lead", name="mine").data
    theirs = sign_in("otto-other-lead", name="theirs").data
    client = client_as(lead)

    page = client.get("/account/tokens/").content.decode()
    foreign = client.post(f"/account/tokens/{theirs['id']}/revoke/")
    revoked = client.post(f"/account/tokens/{mine['id']}/revoke/")

    assert mine["prefix"] in page
    assert theirs["prefix"] not in page
    assert foreign.status_code == 404
    assert revoked.status_code == 302
    assert not ApiToken.objects.filter(pk=mine["id"]).exists()
    assert ApiToken.objects.filter(pk=theirs["id"]).exists()


def test_page_makes_a_read_only_token(client_as, lead):
    made = client_as(lead).post(
        "/account/tokens/", {"name": "grafana", "scope": "read-only", "expires_in_days": "10"}
    )

    assert made.status_code == 200
    assert "It can only read" in made.content.decode()
    assert ApiToken.objects.get(user=lead).scope == "read-only"


def test_token_page_needs_a_signed_in_user(client):
    response = client.get("/account/tokens/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
