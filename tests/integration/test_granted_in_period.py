"""What the review queue shows as held during each request's period
(``selectors.granted_in_request_periods``) is what approving it would count
(``selectors.granted_gpus``, the capacity check's sum), for the kind and for the model, in two
queries however long the page."""

import datetime
import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants import selectors
from tenants.models import QuotaGrant, QuotaRequest
from tests import factories

pytestmark = pytest.mark.django_db

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
OTHER_KIND = "amd.com/gpu"


def test_each_requests_figures_are_the_capacity_checks_for_its_kind_and_its_model():
    rng = random.Random(20261202)
    today = datetime.date(2026, 12, 2)
    east, west = factories.ClusterFactory(name="east"), factories.ClusterFactory(name="west")
    admin = factories.AdminFactory()
    for _ in range(60):
        starts_on = today + datetime.timedelta(days=rng.randint(-60, 60))
        ends_on = None if rng.random() < 0.2 else starts_on + datetime.timedelta(rng.randint(0, 40))
        factories.QuotaGrantFactory(
            request__cluster=rng.choice([east, east, west]),
            request__gpu_resource=rng.choice(["nvidia.com/gpu", "nvidia.com/gpu", OTHER_KIND]),
            request__gpu_model=rng.choice([A100, H100, ""]),
            request__gpus=rng.randint(1, 8),
            request__starts_on=starts_on,
            request__ends_on=ends_on,
            granted_by=admin,
            # Only active grants hold GPUs.
            state=rng.choice([QuotaGrant.State.ACTIVE] * 4 + [QuotaGrant.State.REVOKED]),
        )
    for _ in range(40):
        starts_on = today + datetime.timedelta(days=rng.randint(-30, 90))
        factories.QuotaRequestFactory(
            cluster=rng.choice([east, west]),
            gpu_resource=rng.choice(["nvidia.com/gpu", OTHER_KIND]),
            gpu_model=rng.choice([A100, H100, ""]),
            starts_on=starts_on,
            ends_on=None
            if rng.random() < 0.2
            else starts_on + datetime.timedelta(rng.randint(0, 60)),
        )
    queue = list(selectors.review_queue())

    with CaptureQueriesContext(connection) as queries:
        figures = selectors.granted_in_request_periods(queue)

    assert len(queries) == 2
    assert set(figures) == {r.pk for r in queue}
    for r in queue:
        period = dict(
            cluster=r.cluster, gpu_resource=r.gpu_resource, starts_on=r.starts_on, ends_on=r.ends_on
        )
        assert figures[r.pk].kind == selectors.granted_gpus(**period), r
        assert figures[r.pk].model == selectors.granted_gpus(**period, gpu_model=r.gpu_model), r
    assert any(f.kind > f.model > 0 for f in figures.values())


def test_an_empty_page_reads_nothing():
    with CaptureQueriesContext(connection) as queries:
        assert selectors.granted_in_request_periods(QuotaRequest.objects.none()) == {}
    assert len(queries) == 0
