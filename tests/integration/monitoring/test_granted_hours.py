"""Granted GPU-hours follow a grant's size over time: a shrink counts the old size up to the
moment the admin shrank it and the new size after, as the audit trail recorded it."""

import datetime

import pytest
from django.utils import timezone

from monitoring import usage
from tenants import quota as tenant_quota
from tenants.models import AuditEvent
from tests import factories

pytestmark = [pytest.mark.integration]


def test_a_shrunk_grant_is_counted_at_each_size_for_the_hours_it_had_it(admin):
    cluster = factories.ClusterFactory(name="no-metrics", prometheus_url="")
    today = timezone.localdate()
    grant = factories.QuotaGrantFactory(
        request__cluster=cluster,
        request__gpus=8,
        request__ends_on=None,
        request__starts_on=today - datetime.timedelta(days=2),
        granted_by=admin,
    )
    tenant_quota.quota_grant_shrink(actor=admin, grant=grant, gpus=2)
    shrunk_at = AuditEvent.objects.get(action="quota_grant.shrunk", target_id=grant.pk).created_at
    start = datetime.datetime.combine(
        grant.starts_on, datetime.time(), tzinfo=timezone.get_current_timezone()
    )
    end = shrunk_at + datetime.timedelta(hours=2)

    report = usage.usage_report(user=admin, start=start, end=end, now=end)

    (row,) = [r for r in report.rows if r.team_slug == grant.team.slug]
    hours_before = (shrunk_at - start).total_seconds() / 3600
    assert row.granted_gpu_hours == pytest.approx(8 * hours_before + 2 * 2)
    assert report.errors == {"no-metrics": "No Prometheus is configured for this cluster."}
