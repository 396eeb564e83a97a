"""Grants booked ahead: their first day is recorded once, by the daily step of the sweep, and
the team's passes count them from that day (``tenants.grant_starts``,
``desired_state.team_states``).
No cluster here: tests/integration/reconcile/test_booked_grants.py follows the quota there."""

import datetime

import pytest
from django.utils import timezone

from reconcile import desired_state, manifests
from tenants import grant_starts, quota
from tenants.models import AuditEvent, TeamCluster

pytestmark = pytest.mark.django_db

STARTED = AuditEvent.Action.QUOTA_GRANT_STARTED


def days(n: int) -> datetime.timedelta:
    return datetime.timedelta(days=n)


@pytest.fixture
def book(team, cluster, lead, admin):
    """``book(starts_on, ends_on)``: a lead's request for 4 GPUs, approved by the admin."""

    def make(starts_on, ends_on=None):
        request = quota.quota_request_create(
            requested_by=lead,
            team=team,
            cluster=cluster,
            gpus=4,
            starts_on=starts_on,
            ends_on=ends_on,
            justification="Training.",
        )
        return quota.quota_request_approve(reviewer=admin, quota_request=request)

    return make


def gpu_quota(team, cluster, day) -> int:
    state = desired_state.team_states(teams=[team], cluster=cluster, today=day)[team.pk]
    return manifests.quota_figures(state).gpus["nvidia.com/gpu"]


def test_a_booked_grant_counts_in_the_quota_from_its_first_day(team, cluster, book):
    today = timezone.localdate()
    book(today + days(3), today + days(5))

    assert [gpu_quota(team, cluster, today + days(n)) for n in range(7)] == [0, 0, 0, 4, 4, 4, 0]


def test_its_start_is_recorded_once_on_its_first_day_and_its_team_marked_behind(
    team, cluster, book
):
    today = timezone.localdate()
    grant = book(today + days(3))
    TeamCluster.objects.filter(team=team).update(status=TeamCluster.Status.IN_SYNC)

    assert grant_starts.quota_grants_start(today=today + days(2)) == []
    assert grant_starts.quota_grants_start(today=today + days(3)) == [grant.pk]
    assert grant_starts.quota_grants_start(today=today + days(4)) == []

    event = AuditEvent.objects.get(action=STARTED)
    assert (event.target_type, event.target_id, event.team, event.actor) == (
        "QuotaGrant",
        grant.pk,
        team,
        None,
    )
    assert TeamCluster.objects.get(team=team).status == TeamCluster.Status.PENDING


def test_a_sweep_that_missed_the_first_day_records_it_later(team, cluster, book):
    today = timezone.localdate()
    grant = book(today + days(1), today + days(9))

    assert grant_starts.quota_grants_start(today=today + days(4)) == [grant.pk]


def test_grants_in_effect_when_approved_or_already_over_are_not_recorded(team, cluster, book):
    today = timezone.localdate()
    book(today)
    book(today + days(1), today + days(2))

    assert grant_starts.quota_grants_start(today=today + days(3)) == []
    assert not AuditEvent.objects.filter(action=STARTED).exists()


def test_a_revoked_booking_never_starts(team, cluster, book, admin):
    today = timezone.localdate()
    grant = book(today + days(2))
    quota.quota_grant_revoke(actor=admin, grant=grant)

    assert grant_starts.quota_grants_start(today=today + days(2)) == []
