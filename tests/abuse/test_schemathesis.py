"""schemathesis against the portal's OpenAPI schema: every operation, as a team lead and as an
admin, with data that fits the schema and data that does not. Every answer must be declared by
the schema (status code, body shape, content type, headers) and none may be a server error.

The app runs in-process (Django's WSGI handler, inside the test's transaction), so the suite
needs no server and runs in the fast loop on SQLite as well as on PostgreSQL in ``make test``.
The schema is the one ``/api/v1/schema/`` serves (``test_the_served_schema_is_the_one_tested``),
generated at import because schemathesis parametrizes the tests when the module is collected
(its ``from_fixture`` loader, which could fetch it over HTTP, reads a pytest internal that pytest
9 no longer has). Generation is derandomized with a bounded number of examples per operation:
the same inputs every run, about a minute of CPU in all.

Data that fits the schema may still be refused (a lead may not approve, a grant may have ended):
the checks ask that every answer be one the schema declares, not that valid data be accepted.
"""

import datetime

import hypothesis
import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import strategies as st

from accounts.models import ApiToken
from tests.tokens import api_token, auth_headers

EXAMPLES_PER_OPERATION = 15
# Stands for "the world's object" in generated path parameters (which arrive URL-encoded).
REAL = "__world__"

CONFIG = {
    "seed": 20251011,
    "suppress-health-check": ["all"],
    "generation": {
        "mode": "all",
        "max-examples": EXAMPLES_PER_OPERATION,
        "deterministic": True,
        "database": "none",
    },
    "phases": {
        "examples": {"enabled": True},
        "coverage": {"enabled": True},
        "fuzzing": {"enabled": True},
        "stateful": {"enabled": False},
    },
    "checks": {
        "enabled": False,
        # The world's cluster and Prometheus are unreachable: 502 and 503 are their declared
        # answers (status_code_conformance fails them where they are not declared).
        "not_a_server_error": {
            "enabled": True,
            "expected-statuses": ["1XX", "2XX", "3XX", "4XX", 502, 503],
        },
        "status_code_conformance": {"enabled": True},
        "content_type_conformance": {"enabled": True},
        "response_schema_conformance": {"enabled": True},
        "response_headers_conformance": {"enabled": True},
    },
}


def _openapi() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


schema = schemathesis.openapi.from_dict(_openapi(), config=schemathesis.Config.from_dict(CONFIG))


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    """Each operation on one object is tried on generated values (mostly missing objects) and
    on the world's objects, whose ids the database chooses: the test fills those in."""
    if not path_parameters:
        return st.just(path_parameters)
    return st.sampled_from([path_parameters, dict.fromkeys(path_parameters, REAL)])


def _real_path_parameters(world) -> dict[str, dict[str, str]]:
    """Path parameter values of the world's objects, by the path prefix they belong to."""
    team = {
        "slug": world["team"].slug,
        "team_slug": world["team"].slug,
        "username": world["member"].username,
        "cluster": world["cluster"].name,
    }
    return {
        "/api/v1/quota-requests/": {"id": str(world["pending"].pk)},
        "/api/v1/quota-grants/": {"id": str(world["grant"].pk)},
        "/api/v1/jobs/": {"id": str(world["job"].pk)},
        "/api/v1/services/": {"id": str(world["service"].pk)},
        "/api/v1/sessions/": {"id": str(world["session"].pk)},
        "/api/v1/audit-events/": {"id": str(world["audit_event"].pk)},
        "/api/v1/billing/budgets/": {"id": str(world["budget"].pk)},
        "/api/v1/sharing-layouts/": {"id": str(world["layout"].pk)},
        # Before the team's own prefix, which they start with.
        "/api/v1/teams/{team_slug}/webhooks/": {**team, "id": str(world["webhook"].pk)},
        "/api/v1/teams/{team_slug}/webhook-deliveries/": {**team, "id": str(world["delivery"].pk)},
        "/api/v1/teams/{team_slug}/member-limits/": {**team, "id": str(world["member_limit"].pk)},
        "/api/v1/teams/": team,
        "/api/v1/monitoring/": team,
        "/api/v1/clusters/": {"name": world["cluster"].name},
        "/api/v1/departments/": {"slug": world["department"].slug},
    }


@pytest.fixture(params=["lead", "admin"])
def caller(request, world, in_process_requests):
    """Who calls: the headers of a lead's or an admin's token, and the world's path values (with
    a second token of the caller's, for the token operations to find and revoke)."""
    user = world[request.param]
    spare, _ = ApiToken.objects.create(user=user, expiry=datetime.timedelta(days=1))
    return {
        "headers": auth_headers(api_token(user)),
        "real": {**_real_path_parameters(world), "/api/v1/tokens/": {"id": str(spare.pk)}},
        "app": get_wsgi_application(),
    }


@schema.parametrize()
@hypothesis.settings(deadline=None)
def test_every_operation_answers_as_its_schema_says(case, caller):
    if case.path_parameters and REAL in case.path_parameters.values():
        path = case.operation.path
        real = next(v for prefix, v in caller["real"].items() if path.startswith(prefix))
        case.path_parameters = {name: real[name] for name in case.path_parameters}
    case.call_and_validate(app=caller["app"], headers=caller["headers"])


def test_the_served_schema_is_the_one_tested(api, lead):
    response = api.as_user(lead).get("/api/v1/schema/", {"format": "json"})

    assert response.status_code == 200
    assert response.json() == _openapi()
