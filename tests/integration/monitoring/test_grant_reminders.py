"""Leads are reminded, a set number of days before a grant's last day, once, with a link to a
request form filled in to extend the grant. The clock is injected (``today``)."""

import datetime

import pytest
from django.test import override_settings

from monitoring import grant_reminders
from monitoring.models import Notification
from monitoring.tasks import remind_grants_ending
from tenants import quota
from tenants.models import AuditEvent
from tests import factories
from tests.integration.conftest import wait_for

pytestmark = pytest.mark.django_db

TODAY = datetime.date(2027, 3, 1)


@pytest.fixture
def grant(team, cluster, lead, admin):
    """8 GPUs of H100 from 1 February to 10 March 2027."""
    return factories.QuotaGrantFactory(
        request__team=team,
        request__cluster=cluster,
        request__requested_by=lead,
        request__gpus=8,
        request__gpu_model="H100",
        request__starts_on=datetime.date(2027, 2, 1),
        request__ends_on=datetime.date(2027, 3, 10),
        granted_by=admin,
    )


def send(today, days=7):
    return grant_reminders.grant_ending_reminders_send(today=today, days=days)


def reminders(grant):
    return Notification.objects.filter(kind=Notification.Kind.GRANT_ENDING, team=grant.team)


def test_no_reminder_before_the_window(grant, lead):
    assert send(datetime.date(2027, 3, 2)) == []  # 8 days before its last day

    assert not reminders(grant).exists()


def test_the_lead_is_reminded_once_the_window_opens(grant, lead, member):
    assert send(datetime.date(2027, 3, 3)) == [grant.pk]  # 7 days before

    (reminder,) = reminders(grant)
    assert reminder.user == lead
    assert reminder.subject == f"Grant #{grant.pk} of vision ends in 7 days"
    assert "ends on 2027-03-10" in reminder.body
    assert reminder.link == f"/teams/vision/requests/new/?extends={grant.pk}"


def test_a_reminder_is_sent_once(grant, lead):
    send(datetime.date(2027, 3, 3))

    assert send(datetime.date(2027, 3, 3)) == []
    assert send(datetime.date(2027, 3, 9)) == []
    assert reminders(grant).count() == 1


def test_the_reminder_is_audited(grant, lead):
    send(datetime.date(2027, 3, 5))

    event = AuditEvent.objects.get(action=AuditEvent.Action.QUOTA_GRANT_ENDING_REMINDED)
    assert (event.target_type, event.target_id, event.team) == ("QuotaGrant", grant.pk, grant.team)
    assert event.actor is None
    assert event.after["ends_on"] == "2027-03-10"
    assert "Reminded 1 lead that it ends on 2027-03-10" in event.note


def test_a_grant_shrunk_to_an_earlier_end_is_reminded_again(grant, lead, admin):
    send(datetime.date(2027, 3, 5))
    quota.quota_grant_shrink(actor=admin, grant=grant, ends_on=datetime.date(2027, 3, 7))

    assert send(datetime.date(2027, 3, 5)) == [grant.pk]
    assert reminders(grant).count() == 2


def test_ended_open_ended_and_past_grants_are_not_reminded(grant, lead, admin, team, cluster):
    quota.quota_grant_revoke(actor=admin, grant=grant)
    open_ended = factories.QuotaGrantFactory(
        request__team=team, request__cluster=cluster, request__ends_on=None, granted_by=admin
    )

    assert send(TODAY, days=30) == []
    assert send(datetime.date(2027, 3, 11)) == []
    assert not reminders(open_ended).exists()


def test_the_number_of_days_is_a_setting(grant, lead):
    with override_settings(PORTAL_GRANT_REMINDER_DAYS=2):
        assert grant_reminders.grant_ending_reminders_send(today=datetime.date(2027, 3, 7)) == []
        assert grant_reminders.grant_ending_reminders_send(today=datetime.date(2027, 3, 8)) == [
            grant.pk
        ]


def test_the_link_opens_a_request_form_filled_in_to_extend_the_grant(client_as, grant, lead):
    send(datetime.date(2027, 3, 3))
    link = reminders(grant).get().link

    response = client_as(lead).get(link)

    assert response.status_code == 200
    form = response.context["form"]
    assert form.initial["cluster"] == grant.cluster_id
    assert form.initial["gpu_resource"] == grant.gpu_resource
    assert form.initial["gpu_model"] == "H100"
    assert form.initial["gpus"] == 8
    assert form.initial["starts_on"] == datetime.date(2027, 3, 11)
    assert form.initial["ends_on"] == datetime.date(2027, 4, 17)  # as long again: 38 days
    html = response.content.decode()
    assert 'value="2027-03-11"' in html
    assert f"Extension of grant #{grant.pk}" in html


def test_a_link_to_another_teams_grant_prefills_nothing(client_as, grant, other_lead):
    response = client_as(other_lead).get(f"/teams/speech/requests/new/?extends={grant.pk}")

    assert response.status_code == 200
    assert "gpus" not in response.context["form"].initial


@pytest.mark.parametrize("value", ["abc", "-1", "99999999999999999999999", "", "²"])
def test_a_bad_extends_value_is_an_empty_form(client_as, grant, lead, value):
    response = client_as(lead).get(f"/teams/vision/requests/new/?extends={value}")

    assert response.status_code == 200
    assert "gpus" not in response.context["form"].initial


@pytest.mark.django_db(transaction=True)
def test_the_beat_task_reminds_through_a_real_worker(celery_worker_process, grant, lead):
    remind_grants_ending.delay(today="2027-03-04")

    wait_for(lambda: reminders(grant).exists(), what="the worker to remind the lead")
    assert reminders(grant).get().subject.endswith("ends in 6 days")
