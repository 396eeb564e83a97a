"""Helpers for page tests: services to set up the state a page shows (so pages are tested
against the same rules the portal applies); ``client_as`` comes from tests/conftest.py."""

import datetime

import pytest
from django.utils import timezone

from tenants import quota
from tests import factories


@pytest.fixture
def make_request(cluster):
    """``make_request(lead, team, gpus=4, ...)``: a pending request filed through the service."""

    def make(requested_by, team, **kwargs):
        kwargs.setdefault("cluster", cluster)
        kwargs.setdefault("gpus", 4)
        kwargs.setdefault("ends_on", timezone.localdate() + datetime.timedelta(days=30))
        kwargs.setdefault("justification", "Training the next vision model.")
        return quota.quota_request_create(requested_by=requested_by, team=team, **kwargs)

    return make


@pytest.fixture
def make_grant(make_request, admin):
    """``make_grant(lead, team, gpus=4)``: a request approved by the admin; returns the grant."""

    def make(requested_by, team, **kwargs):
        quota_request = make_request(requested_by, team, **kwargs)
        return quota.quota_request_approve(reviewer=admin, quota_request=quota_request)

    return make


@pytest.fixture
def second_cluster(db):
    """A cluster that offers a different GPU kind than ``cluster``."""
    cluster = factories.ClusterFactory(name="gpu-west", display_name="GPU West")
    factories.GpuCapacityFactory(
        cluster=cluster, resource_name="nvidia.com/mig-1g.10gb", gpu_model="A100 MIG", allocatable=8
    )
    return cluster
