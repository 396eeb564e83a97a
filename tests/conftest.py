"""Fixtures that make permission tests read like sentences.

Two teams share one cluster: ``lead`` leads team A (``team``) where ``member`` and ``viewer``
also belong; ``other_lead`` leads team B (``other_team``), which nobody in team A belongs to.
"""

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.test.utils import override_settings
from rest_framework.test import APIClient

from tenants.models import Membership
from tests import factories

# The session-scoped `devcluster` fixture: a real control plane with simulated GPU nodes.
pytest_plugins = ["devcluster.pytest_plugin"]

PASSWORD = "correct-horse-battery"


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    """Factories hash a password per user; the default hasher is deliberately slow."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def _plain_static_storage():
    """Pages reference static files by name; the manifest storage used with DEBUG off needs
    collectstatic first, which tests have no reason to run (the production-server test does)."""
    storages = {
        **django_settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(STORAGES=storages):
        yield


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


class PortalAPIClient(APIClient):
    """An API client that sends JSON bodies, as API clients do."""

    default_format = "json"

    def as_user(self, user):
        self.force_authenticate(user=user)
        return self


@pytest.fixture
def api():
    """An API client; ``api.as_user(user)`` authenticates it as that user."""
    return PortalAPIClient()


@pytest.fixture
def client_as():
    """``client_as(user)``: a fresh page client signed in as that user."""

    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make
