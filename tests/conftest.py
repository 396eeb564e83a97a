"""Fixtures that make permission tests read like sentences.

Two teams share one cluster: ``lead`` leads team A (``team``) where ``member`` and ``viewer``
also belong; ``other_lead`` leads team B (``other_team``), which nobody in team A belongs to.
"""

import pytest
from rest_framework.test import APIClient

from tenants.models import Membership
from tests import factories

# The session-scoped `devcluster` fixture: a real control plane with simulated GPU nodes.
pytest_plugins = ["devcluster.pytest_plugin"]

PASSWORD = "correct-horse-battery"


@pytest.fixture
def cluster(db):
    cluster = factories.ClusterFactory(name="gpu-east", display_name="GPU East")
    factories.GpuCapacityFactory(cluster=cluster, allocatable=16)
    return cluster


@pytest.fixture
def admin(db):
    return factories.AdminFactory(username="ada-admin")


@pytest.fixture
def team(db):
    return factories.TeamFactory(slug="vision", name="Vision")


@pytest.fixture
def other_team(db):
    return factories.TeamFactory(slug="speech", name="Speech")


def _member(team, username, role):
    user = factories.UserFactory(username=username)
    factories.MembershipFactory(team=team, user=user, role=role)
    return user


@pytest.fixture
def lead(team):
    return _member(team, "lena-lead", Membership.Role.LEAD)


@pytest.fixture
def member(team):
    return _member(team, "mo-member", Membership.Role.MEMBER)


@pytest.fixture
def viewer(team):
    return _member(team, "vic-viewer", Membership.Role.VIEWER)


@pytest.fixture
def other_lead(other_team):
    return _member(other_team, "otto-other-lead", Membership.Role.LEAD)


@pytest.fixture
def outsider(db):
    """A signed-up user who belongs to no team."""
    return factories.UserFactory(username="oscar-outsider")


@pytest.fixture
def api():
    """An API client; ``api.as_user(user)`` authenticates it as that user."""

    class PortalAPIClient(APIClient):
        def as_user(self, user):
            self.force_authenticate(user=user)
            return self

    return PortalAPIClient()
