"""Helpers for page tests: a test client signed in as a given user, and services to set up
the state a page shows (so pages are tested against the same rules the portal applies)."""

import datetime

import pytest
from django.test import Client
from django.utils import timezone

from tenants import services
from tests import factories


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    # Pages reference static files by name; the manifest storage used with DEBUG off needs
    # collectstatic first, which page tests have no reason to run.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def client_as():
    """``client_as(user)``: a fresh test client signed in as that user."""

    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def make_request(cluster):
    """``make_request(lead, team, gpus=4, ...)``: a pending request filed through the service."""

    def make(requested_by, team, **kwargs):
        kwargs.setdefault("cluster", cluster)
        kwargs.setdefault("gpus", 4)
        kwargs.setdefault("ends_on", timezone.localdate() + datetime.timedelta(days=30))
        kwargs.setdefault("justification", "Training the next vision model.")
        return services.quota_request_create(requested_by=requested_by, team=team, **kwargs)

    return make


@pytest.fixture
def make_grant(make_request, admin):
    """``make_grant(lead, team, gpus=4)``: a request approved by the admin; returns the grant."""

    def make(requested_by, team, **kwargs):
        quota_request = make_request(requested_by, team, **kwargs)
        return services.quota_request_approve(reviewer=admin, quota_request=quota_request)

    return make


@pytest.fixture
def second_cluster(db):
    """A cluster that offers a different GPU kind than ``cluster``."""
    cluster = factories.ClusterFactory(name="gpu-west", display_name="GPU West")
    factories.GpuCapacityFactory(
        cluster=cluster, resource_name="nvidia.com/mig-1g.10gb", gpu_model="A100 MIG", allocatable=8
    )
    return cluster
