"""Fixtures for the REST API tests: a pending request and an active grant for each team.

Team A (``team``, led by ``lead``) and team B (``other_team``, led by ``other_lead``) each get
one, so every test can ask "may this user see or touch that team's object?".
"""

import datetime

import pytest
from django.utils import timezone

from tests import factories


@pytest.fixture
def today():
    return timezone.localdate()


@pytest.fixture
def pending_request(team, cluster, lead, today):
    return factories.QuotaRequestFactory(
        team=team,
        cluster=cluster,
        requested_by=lead,
        gpus=4,
        starts_on=today,
        ends_on=today + datetime.timedelta(days=30),
    )


@pytest.fixture
def other_pending_request(other_team, cluster, other_lead, today):
    return factories.QuotaRequestFactory(
        team=other_team, cluster=cluster, requested_by=other_lead, gpus=2, starts_on=today
    )


@pytest.fixture
def grant(team, cluster, lead, admin, today):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=4,
        request__starts_on=today,
        request__ends_on=today + datetime.timedelta(days=30),
        granted_by=admin,
    )


@pytest.fixture
def other_grant(other_team, cluster, other_lead, admin, today):
    return factories.QuotaGrantFactory(
        request__team=other_team,
        request__cluster=cluster,
        request__requested_by=other_lead,
        request__gpus=2,
        request__starts_on=today,
        granted_by=admin,
    )
