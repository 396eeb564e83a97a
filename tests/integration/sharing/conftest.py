"""Sharing layouts: the team's grant of 4 whole A100 on gpu-east, for 30 days (started
yesterday), and a layout request of the team's lead."""

import datetime

import pytest
from django.utils import timezone

from tests import factories

# The devcluster loop's worker identity and teams, as the reconcile suite makes them.
from tests.integration.reconcile.conftest import (  # noqa: F401 (fixtures)
    admin_user,
    approve,
    make_team,
    portal_kubeconfig,
)

A100 = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture
def today():
    return timezone.localdate()


@pytest.fixture
def a100_grant(team, cluster, lead, admin, today):
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpu_model=A100,
        request__gpus=4,
        request__starts_on=today - datetime.timedelta(days=1),
        request__ends_on=today + datetime.timedelta(days=30),
        granted_by=admin,
    )


@pytest.fixture
def pending_layout(a100_grant, lead, today):
    return factories.LayoutRequestFactory(
        source_grant=a100_grant, requested_by=lead, ends_on=today + datetime.timedelta(days=7)
    )
