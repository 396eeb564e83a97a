"""Team creation under concurrency, against real PostgreSQL."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connections

from tenants import services
from tenants.models import Team

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_admins_creating_the_same_team_at_once_get_one_team_and_a_clear_error(
    postgres_database, admin
):
    # Given two admins about to create team "nlp" at the same moment
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def create() -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(services.team_create(actor=admin, slug="nlp", name="NLP"))
        except Exception as error:
            outcomes.append(error)
        finally:
            connections.close_all()

    # When both submit
    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    # Then one team exists and the other admin gets a validation error on the slug
    assert Team.objects.filter(slug="nlp").count() == 1
    errors = [o for o in outcomes if not isinstance(o, Team)]
    assert len(errors) == 1
    assert isinstance(errors[0], ValidationError)
    assert "already exists" in errors[0].message_dict["slug"][0]
