"""Who is asking: anonymous clients, token authentication, /me/, and the API's own description."""

import re

import pytest
from django.core.management import call_command
from drf_spectacular.drainage import reset_generator_stats
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

EVERY_ENDPOINT = [
    ("get", "/api/v1/me/"),
    ("get", "/api/v1/teams/"),
    ("post", "/api/v1/teams/"),
    ("get", "/api/v1/teams/vision/"),
    ("get", "/api/v1/teams/vision/members/"),
    ("post", "/api/v1/teams/vision/members/"),
    ("get", "/api/v1/teams/vision/members/lena-lead/"),
    ("patch", "/api/v1/teams/vision/members/lena-lead/"),
    ("delete", "/api/v1/teams/vision/members/lena-lead/"),
    ("get", "/api/v1/clusters/"),
    ("get", "/api/v1/clusters/gpu-east/"),
    ("patch", "/api/v1/clusters/gpu-east/"),
    ("get", "/api/v1/quota-requests/"),
    ("post", "/api/v1/quota-requests/"),
    ("get", "/api/v1/quota-requests/1/"),
    ("post", "/api/v1/quota-requests/1/approve/"),
    ("post", "/api/v1/quota-requests/1/reject/"),
    ("post", "/api/v1/quota-requests/1/cancel/"),
    ("get", "/api/v1/quota-requests/review-queue/"),
    ("get", "/api/v1/quota-grants/"),
    ("get", "/api/v1/quota-grants/1/"),
    ("post", "/api/v1/quota-grants/1/revoke/"),
    ("post", "/api/v1/quota-grants/1/shrink/"),
    ("get", "/api/v1/audit-events/"),
    ("get", "/api/v1/audit-events/1/"),
]


@pytest.mark.parametrize(("method", "url"), EVERY_ENDPOINT)
def test_anonymous_client_gets_401_from_every_endpoint(api, team, lead, cluster, method, url):
    response = getattr(api, method)(url, {})

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_token_obtained_with_password_authenticates_later_calls(lead):
    client = APIClient()

    obtained = client.post(
        "/api/v1/auth/token/", {"username": "lena-lead", "password": "correct-horse-battery"}
    )
    client.credentials(HTTP_AUTHORIZATION=f"Token {obtained.data['token']}")
    response = client.get("/api/v1/me/")

    assert obtained.status_code == 200
    assert response.status_code == 200
    assert response.data["username"] == "lena-lead"


def test_token_is_refused_for_a_wrong_password(lead):
    response = APIClient().post(
        "/api/v1/auth/token/", {"username": "lena-lead", "password": "wrong"}
    )

    assert response.status_code == 400
    assert "token" not in response.data


def test_unknown_token_is_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    response = client.get("/api/v1/me/")

    assert response.status_code == 401


def test_me_lists_the_users_teams_and_roles(api, lead, other_team):
    response = api.as_user(lead).get("/api/v1/me/")

    assert response.status_code == 200
    assert response.data["is_admin"] is False
    assert response.data["memberships"] == [
        {
            "team": {"id": lead.memberships.get().team_id, "slug": "vision", "name": "Vision"},
            "role": "lead",
        }
    ]


def test_me_says_an_admin_is_an_admin(api, admin):
    response = api.as_user(admin).get("/api/v1/me/")

    assert response.data["is_admin"] is True
    assert response.data["memberships"] == []


def test_schema_endpoint_serves_openapi_3_with_the_api_paths(api, outsider):
    response = api.as_user(outsider).get("/api/v1/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    for path in [
        "/api/v1/quota-requests/{id}/approve/",
        "/api/v1/quota-requests/review-queue/",
        "/api/v1/quota-grants/{id}/shrink/",
        "/api/v1/teams/{team_slug}/members/{username}/",
        "/api/v1/audit-events/",
        "/api/v1/auth/token/",
        "/api/v1/tokens/",
        "/api/v1/tokens/{id}/",
    ]:
        assert path in schema["paths"]
    assert schema["components"]["securitySchemes"]["knoxApiToken"]["name"] == "Authorization"
    assert "security" not in schema["paths"]["/api/v1/auth/token/"]["post"]  # no credentials


def test_schema_generates_without_warnings_and_validates(tmp_path):
    reset_generator_stats()

    # Raises SchemaGenerationError on any warning, SchemaValidationError on an invalid schema.
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml")
    )

    assert (tmp_path / "schema.yml").read_text().startswith("openapi: 3")


def test_anonymous_client_gets_401_from_the_schema(api):
    response = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 401
    assert "openapi" not in response.json()


def test_anonymous_visitor_of_the_docs_page_is_sent_to_sign_in(client):
    response = client.get("/api/v1/docs/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/api/v1/docs/"


def test_docs_page_loads_swagger_ui_from_local_static_files_only(client_as, outsider):
    client = client_as(outsider)

    response = client.get("/api/v1/docs/")
    script = client.get("/api/v1/docs/?script=")

    html = response.content.decode()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert not re.search(r"https?://", html)
    assert not re.search(r"<script>", html)  # its start-up script is a file of its own
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "/api/v1/schema/" in script.content.decode()
