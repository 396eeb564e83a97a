"""The team's webhooks page: for its leads and admins; a bad URL is a form error and adds or
changes nothing; a secret is shown once."""

import pytest

from tests import factories
from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.django_db

FORM = {
    "name": "chat",
    "url": "https://hooks.example.com/services/T1/B2/abc",
    "format": "slack",
    "events": ["gpu_job.failed", "budget.exhausted"],
    "active": "on",
}


def page(team):
    return f"/teams/{team.slug}/webhooks/"


def test_lead_adds_a_webhook_and_sees_its_secret_once(client_as, team, lead):
    client = client_as(lead)

    answer = client.post(page(team), FORM)

    assert answer.status_code == 200
    webhook = Webhook.objects.get(team=team)
    assert (webhook.name, webhook.format, webhook.active) == ("chat", "slack", True)
    assert webhook.events == ["gpu_job.failed", "budget.exhausted"]
    assert f'<code data-testid="secret">{webhook.secret}</code>' in answer.content.decode()
    again = client.get(page(team)).content.decode()
    assert webhook.secret not in again
    assert webhook.secret_hint in again


@pytest.mark.parametrize(
    ("bad_url", "words"),
    [
        ("ftp://hooks.example.com/x", "Must start with http:// or https://"),
        ("http://testserver/teams/", "Points at the portal itself"),
        ("https://", "Must name a host"),
    ],
)
def test_a_bad_url_is_a_form_error_and_adds_nothing(client_as, team, lead, bad_url, words):
    answer = client_as(lead).post(page(team), {**FORM, "url": bad_url})

    assert answer.status_code == 400
    assert words in answer.content.decode()
    assert not Webhook.objects.exists()


def test_changing_a_webhook_to_a_bad_url_changes_nothing(client_as, team, lead):
    webhook = factories.WebhookFactory(team=team, name="chat", url="https://a.example.com/")

    answer = client_as(lead).post(
        f"{page(team)}{webhook.pk}/", {**FORM, "name": "renamed", "url": "file:///etc/passwd"}
    )

    assert answer.status_code == 400
    assert "Must start with http:// or https://" in answer.content.decode()
    webhook.refresh_from_db()
    assert (webhook.name, webhook.url) == ("chat", "https://a.example.com/")


def test_lead_changes_a_webhook(client_as, team, lead):
    webhook = factories.WebhookFactory(team=team, name="chat")

    answer = client_as(lead).post(f"{page(team)}{webhook.pk}/", {**FORM, "name": "alerts"})

    assert answer.status_code == 302
    webhook.refresh_from_db()
    assert webhook.name == "alerts"
    assert webhook.active is True


def test_lead_sends_a_test_event_and_sees_its_delivery(client_as, team, lead):
    webhook = factories.WebhookFactory(team=team)
    client = client_as(lead)

    assert client.post(f"{page(team)}{webhook.pk}/test/").status_code == 302

    delivery = Delivery.objects.get()
    listed = client.get(page(team)).content.decode()
    assert f'data-testid="delivery-{delivery.pk}"' in listed
    assert "webhook.test" in listed
    assert "Pending" in listed


def test_lead_rotates_a_secret_and_sees_the_new_one(client_as, team, lead):
    webhook = factories.WebhookFactory(team=team)
    old = webhook.secret

    answer = client_as(lead).post(f"{page(team)}{webhook.pk}/rotate-secret/")

    webhook.refresh_from_db()
    assert webhook.secret != old
    assert webhook.secret in answer.content.decode()


def test_lead_deletes_a_webhook(client_as, team, lead):
    webhook = factories.WebhookFactory(team=team)

    assert client_as(lead).post(f"{page(team)}{webhook.pk}/delete/").status_code == 302

    assert not Webhook.objects.exists()


def test_lead_sends_a_delivery_again(client_as, team, lead):
    delivery = factories.DeliveryFactory(webhook=factories.WebhookFactory(team=team))

    url = f"/teams/{team.slug}/webhook-deliveries/{delivery.pk}/redeliver/"
    assert client_as(lead).post(url).status_code == 302

    assert Delivery.objects.count() == 2


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_cannot_open_the_page_or_change_webhooks(client_as, team, who, request):
    webhook = factories.WebhookFactory(team=team)
    client = client_as(request.getfixturevalue(who))

    assert client.get(page(team)).status_code == 403
    assert client.post(page(team), FORM).status_code == 403
    assert client.post(f"{page(team)}{webhook.pk}/delete/").status_code == 403
    assert Webhook.objects.count() == 1


@pytest.mark.parametrize("who", ["other_lead", "outsider"])
def test_another_team_does_not_find_the_page(client_as, team, who, request):
    webhook = factories.WebhookFactory(team=team)
    delivery = factories.DeliveryFactory(webhook=webhook)
    client = client_as(request.getfixturevalue(who))

    assert client.get(page(team)).status_code == 404
    assert client.post(f"{page(team)}{webhook.pk}/test/").status_code == 404
    redeliver = f"/teams/{team.slug}/webhook-deliveries/{delivery.pk}/redeliver/"
    assert client.post(redeliver).status_code == 404
    assert Delivery.objects.count() == 1


def test_a_leads_own_team_path_does_not_reach_another_teams_webhook(
    client_as, team, lead, other_team
):
    theirs = factories.WebhookFactory(team=other_team)

    assert client_as(lead).post(f"{page(team)}{theirs.pk}/delete/").status_code == 404
    assert Webhook.objects.filter(pk=theirs.pk).exists()


def test_the_team_page_links_to_webhooks_for_leads_only(client_as, team, lead, member):
    assert (
        'data-testid="webhooks-link"'
        in client_as(lead).get(f"/teams/{team.slug}/").content.decode()
    )
    assert (
        'data-testid="webhooks-link"'
        not in client_as(member).get(f"/teams/{team.slug}/").content.decode()
    )


def test_a_bad_delivery_filter_is_shown_not_a_500(client_as, team, lead):
    answer = client_as(lead).get(page(team), {"status": "lost", "webhook": "x"})
    assert answer.status_code == 200
    assert "Select a valid choice" in answer.content.decode()
