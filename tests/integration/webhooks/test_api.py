"""A team's webhooks over the API: leads and admins manage them, nobody else sees them; bad
input is a 400 naming the field and changes nothing."""

import pytest

from tenants.models import AuditEvent
from tests import factories
from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


def url(team, *rest):
    return "/".join([f"/api/v1/teams/{team.slug}/webhooks", *map(str, rest)]) + "/"


def deliveries_url(team, *rest):
    return "/".join([f"/api/v1/teams/{team.slug}/webhook-deliveries", *map(str, rest)]) + "/"


BODY = {
    "name": "chat",
    "url": "https://hooks.example.com/services/T1/B2/abc",
    "format": "slack",
    "events": ["quota_request.decided", "gpu_job.failed"],
}


def test_lead_adds_a_webhook_and_sees_its_secret_once(api, team, lead):
    answer = api.as_user(lead).post(url(team), BODY)

    assert answer.status_code == 201, answer.json()
    made = answer.json()
    webhook = Webhook.objects.get(team=team)
    assert made["secret"] == webhook.secret
    assert len(webhook.secret) >= 40
    assert made["events"] == BODY["events"]
    assert made["format"] == "slack"
    assert made["active"] is True
    listed = api.get(url(team)).json()["results"]
    assert [w["name"] for w in listed] == ["chat"]
    assert "secret" not in listed[0]
    assert listed[0]["secret_hint"] == "…" + webhook.secret[-4:]
    assert "secret" not in api.get(url(team, webhook.pk)).json()
    event = AuditEvent.objects.get(action=Action.WEBHOOK_CREATED)
    assert event.team == team
    assert event.actor == lead
    assert "secret" not in event.after
    assert event.after["url"] == "https://hooks.example.com/…"  # never its path or query
    assert BODY["url"] not in str(event.after)


def test_admin_manages_any_teams_webhooks(api, team, admin):
    assert api.as_user(admin).post(url(team), BODY).status_code == 201


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_of_the_team_cannot_see_or_add_webhooks(api, team, who, request):
    factories.WebhookFactory(team=team)
    user = request.getfixturevalue(who)
    client = api.as_user(user)
    assert client.get(url(team)).status_code == 403
    assert client.post(url(team), BODY).status_code == 403
    assert client.get(deliveries_url(team)).status_code == 403
    assert Webhook.objects.filter(team=team).count() == 1


@pytest.mark.parametrize("who", ["other_lead", "outsider"])
def test_another_teams_webhooks_are_not_found(api, team, who, request):
    webhook = factories.WebhookFactory(team=team)
    delivery = factories.DeliveryFactory(webhook=webhook)
    client = api.as_user(request.getfixturevalue(who))
    assert client.get(url(team)).status_code == 404
    assert client.get(url(team, webhook.pk)).status_code == 404
    assert client.patch(url(team, webhook.pk), {"active": False}).status_code == 404
    assert client.delete(url(team, webhook.pk)).status_code == 404
    assert client.post(url(team, webhook.pk, "test")).status_code == 404
    assert client.post(deliveries_url(team, delivery.pk, "redeliver")).status_code == 404
    assert Webhook.objects.get(pk=webhook.pk).active is True
    assert Delivery.objects.count() == 1


def test_a_lead_cannot_reach_another_teams_webhook_through_their_own_team(
    api, team, lead, other_team
):
    theirs = factories.WebhookFactory(team=other_team)
    delivery = factories.DeliveryFactory(webhook=theirs)
    client = api.as_user(lead)
    assert client.get(url(team, theirs.pk)).status_code == 404
    assert client.post(deliveries_url(team, delivery.pk, "redeliver")).status_code == 404
    assert client.get(deliveries_url(team)).json()["results"] == []


def test_anonymous_is_refused(api, team):
    assert api.get(url(team)).status_code in (401, 403)


@pytest.mark.parametrize(
    ("bad_url", "words"),
    [
        ("ftp://hooks.example.com/x", "Must start with http:// or https://"),
        ("gopher://x", "Must start with http:// or https://"),
        ("https://", "Must name a host"),
        ("http://testserver/api/v1/", "portal itself"),  # the host the request came to
        ("http://127.0.0.1:8000/hook", "portal itself"),  # PORTAL_BASE_URL
    ],
)
def test_a_url_not_http_or_of_the_portal_is_a_400_and_adds_nothing(api, team, lead, bad_url, words):
    answer = api.as_user(lead).post(url(team), {**BODY, "url": bad_url})

    assert answer.status_code == 400
    assert words in answer.json()["url"][0]
    assert not Webhook.objects.exists()
    assert not AuditEvent.objects.filter(action=Action.WEBHOOK_CREATED).exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"events": ["gpu_job.exploded"]}, "events"),
        ({"events": []}, "events"),
        ({"events": "gpu_job.failed"}, "events"),
        ({"format": "xml"}, "format"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"url": 5}, "url"),
        ({"active": "perhaps"}, "active"),
    ],
)
def test_bad_fields_are_a_400_naming_them(api, team, lead, change, field):
    answer = api.as_user(lead).post(url(team), {**BODY, **change})
    assert answer.status_code == 400
    assert field in answer.json()
    assert not Webhook.objects.exists()


def test_a_body_that_is_not_an_object_is_a_400(api, team, lead):
    assert api.as_user(lead).post(url(team), ["chat"]).status_code == 400
    assert not Webhook.objects.exists()


def test_names_are_unique_within_a_team(api, team, lead, other_team, other_lead):
    api.as_user(lead).post(url(team), BODY)
    answer = api.post(url(team), BODY)
    assert answer.status_code == 400
    assert "name" in answer.json()
    assert api.as_user(other_lead).post(url(other_team), BODY).status_code == 201


def test_a_change_with_one_bad_field_changes_nothing(api, team, lead):
    webhook = factories.WebhookFactory(team=team, name="chat", url="https://a.example.com/")

    answer = api.as_user(lead).patch(
        url(team, webhook.pk), {"name": "renamed", "url": "ftp://b.example.com/"}
    )

    assert answer.status_code == 400
    assert "url" in answer.json()
    webhook.refresh_from_db()
    assert (webhook.name, webhook.url) == ("chat", "https://a.example.com/")
    assert not AuditEvent.objects.filter(action=Action.WEBHOOK_UPDATED).exists()


def test_lead_changes_a_webhook(api, team, lead):
    webhook = factories.WebhookFactory(team=team, events=["gpu_job.failed"])

    answer = api.as_user(lead).patch(
        url(team, webhook.pk), {"events": ["gpus.idle", "budget.warning"], "active": False}
    )

    assert answer.status_code == 200, answer.json()
    webhook.refresh_from_db()
    assert webhook.events == ["gpus.idle", "budget.warning"]
    assert webhook.active is False
    event = AuditEvent.objects.get(action=Action.WEBHOOK_UPDATED)
    assert event.before["active"] is True
    assert event.after["active"] is False


def test_lead_rotates_the_secret(api, team, lead):
    webhook = factories.WebhookFactory(team=team)
    old = webhook.secret

    answer = api.as_user(lead).post(url(team, webhook.pk, "rotate-secret"))

    assert answer.status_code == 200
    webhook.refresh_from_db()
    assert webhook.secret != old
    assert answer.json()["secret"] == webhook.secret
    assert AuditEvent.objects.get(action=Action.WEBHOOK_UPDATED).note == "Signing secret rotated."


def test_lead_deletes_a_webhook_with_its_deliveries(api, team, lead):
    webhook = factories.WebhookFactory(team=team)
    factories.DeliveryFactory(webhook=webhook)

    assert api.as_user(lead).delete(url(team, webhook.pk)).status_code == 204

    assert not Webhook.objects.exists()
    assert not Delivery.objects.exists()
    assert AuditEvent.objects.get(action=Action.WEBHOOK_DELETED).before["name"] == webhook.name


def test_a_test_event_is_a_pending_delivery_of_that_webhook(api, team, lead):
    webhook = factories.WebhookFactory(team=team, format="generic")

    answer = api.as_user(lead).post(url(team, webhook.pk, "test"))

    assert answer.status_code == 202
    delivery = Delivery.objects.get()
    assert answer.json()["id"] == delivery.pk
    assert answer.json()["status"] == "pending"
    assert delivery.webhook == webhook
    assert delivery.event == "webhook.test"
    assert delivery.payload["event"] == "webhook.test"
    assert delivery.payload["team"] == {"slug": team.slug, "name": team.name}
    assert delivery.payload["link"].endswith(f"/teams/{team.slug}/webhooks/")


def test_deliveries_are_listed_newest_first_and_filtered(api, team, lead):
    webhook = factories.WebhookFactory(team=team)
    other = factories.WebhookFactory(team=team)
    first = factories.DeliveryFactory(webhook=webhook, status="failed")
    second = factories.DeliveryFactory(webhook=webhook, status="succeeded")
    factories.DeliveryFactory(webhook=other)
    client = api.as_user(lead)

    listed = client.get(deliveries_url(team), {"webhook": webhook.pk}).json()["results"]
    assert [d["id"] for d in listed] == [second.pk, first.pk]
    failed = client.get(deliveries_url(team), {"status": "failed"}).json()["results"]
    assert [d["id"] for d in failed] == [first.pk]
    assert client.get(deliveries_url(team), {"status": "lost"}).status_code == 400
    assert client.get(deliveries_url(team), {"webhook": "x"}).status_code == 400


def test_redeliver_sends_the_same_body_as_a_new_delivery(api, team, lead):
    old = factories.DeliveryFactory(
        webhook=factories.WebhookFactory(team=team), status="failed", payload={"a": 1}
    )

    answer = api.as_user(lead).post(deliveries_url(team, old.pk, "redeliver"))

    assert answer.status_code == 202
    again = Delivery.objects.get(pk=answer.json()["id"])
    assert again.pk != old.pk
    assert again.payload == {"a": 1}
    assert again.status == "pending"
    old.refresh_from_db()
    assert old.status == "failed"


def test_every_bad_field_is_named_in_one_answer(api, team, lead):
    webhook = factories.WebhookFactory(team=team)

    answer = api.as_user(lead).patch(
        url(team, webhook.pk), {"url": "ftp://x.example.com/", "name": " "}
    )

    assert answer.status_code == 400
    assert set(answer.json()) == {"url", "name"}
