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


def test_a_report_reads_only_the_grants_in_force_in_its_range(admin):
    """Grants that ended before the range or start after it grant nothing in it: the report
    does not read them (an admin's month among years of grants), and its figures are the same."""
    cluster = factories.ClusterFactory(name="no-metrics", prometheus_url="")
    team = factories.TeamFactory(slug="ranged")
    today = timezone.localdate()
    tz = timezone.get_current_timezone()

    def grant(starts: int, ends: int | None):
        return factories.QuotaGrantFactory(
            request__team=team,
            request__cluster=cluster,
            request__gpus=1,
            request__starts_on=today + datetime.timedelta(days=starts),
            request__ends_on=None if ends is None else today + datetime.timedelta(days=ends),
            granted_by=admin,
        )

    ended_before, overlapping, open_ended = grant(-40, -20), grant(-12, -8), grant(-9, None)
    starts_after = grant(5, 9)
    revoked = grant(-30, None)
    revoked.ended_at = datetime.datetime.combine(
        today - datetime.timedelta(days=15), datetime.time(), tzinfo=tz
    )
    revoked.save()
    start = datetime.datetime.combine(
        today - datetime.timedelta(days=10), datetime.time(), tzinfo=tz
    )
    end = datetime.datetime.combine(today, datetime.time(), tzinfo=tz)

    report = usage.usage_report(user=admin, start=start, end=end, now=end)

    (row,) = report.rows
    assert {g.starts_on for g in row.grants} == {overlapping.starts_on, open_ended.starts_on}
    assert ended_before.starts_on not in {g.starts_on for g in row.grants}
    assert starts_after.starts_on not in {g.starts_on for g in row.grants}
    # Three days of the one (days -10 to -8), nine of the other (days -9 to -1).
    assert row.granted_gpu_hours == pytest.approx((3 + 9) * 24)
