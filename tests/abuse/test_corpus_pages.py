"""The corpus against the writes pages make through forms of their own (a team's idle-GPU
policy, marking notifications read): nothing written, never a server error, and an answer the
page shows: a 400 naming the field (text that is not text: ``core.middleware``), or the
redirect back with an error message (the idle policy's messages say what is wrong, not which
field: tests/integration/pages/test_idle_policy_page.py holds them to their words). Ids that
are no notification's mark nothing (tests/integration/pages/test_notifications.py).

The API's writes, marking notifications read among them, are in ``test_corpus``.
"""

from __future__ import annotations

from functools import partial
from urllib.parse import urlencode

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from tests.abuse.harness import BLANK, SENT_AS_TEXT, Outcome, run_case

IDLE_POLICY = {"notify_leads": "on", "stop_after_minutes": "60", "warn_minutes_before_stop": "15"}


def post_form(client: Client, path: str, data: dict):
    """A form as a browser posts it: UTF-8, a lone surrogate as the bytes CESU-8 gives it."""
    body = urlencode(data, errors="surrogatepass")
    return client.post(path, body, content_type="application/x-www-form-urlencoded")


@pytest.fixture
def page_client(world):
    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


def shown_on_the_page(outcome: Outcome, what: str, response, *, field: str) -> None:
    """Refused: a 400 naming the field, or the redirect back with an error message."""
    if response.status_code == 400:
        body = response.content.decode(errors="replace")
        outcome.check(
            body.startswith(f"{field}:"), f"{what}: the 400 does not name {field}: {body[:200]!r}"
        )
        return
    errors = [str(m) for m in get_messages(response.wsgi_request) if m.level_tag == "error"]
    outcome.check(
        response.status_code == 302 and errors,
        f"{what}: answered {response.status_code}, error messages {errors!r}",
    )


def marks_nothing(outcome: Outcome, what: str, response) -> None:
    """Refused (a 400 naming ``id``) or read as naming no notification (the redirect back)."""
    body = response.content.decode(errors="replace")
    outcome.check(
        response.status_code == 302 or (response.status_code == 400 and body.startswith("id:")),
        f"{what}: answered {response.status_code} {body[:200]!r}",
    )


def test_the_valid_idle_policy_is_saved(world, page_client):
    client = page_client(world["lead"])

    response = client.post(f"/monitoring/teams/{world['team'].slug}/idle-policy/", IDLE_POLICY)

    assert response.status_code == 302
    assert world["team"].idle_policy.stop_after_minutes == 60


@pytest.mark.parametrize("field", ["stop_after_minutes", "warn_minutes_before_stop"])
def test_every_nasty_idle_policy_value_is_refused_and_saves_nothing(field, world, page_client):
    client = page_client(world["lead"])
    path = f"/monitoring/teams/{world['team'].slug}/idle-policy/"
    outcome = Outcome()
    # Leaving out how long before stopping is "never stop".
    valid = BLANK if field == "stop_after_minutes" else set()
    for nasty in SENT_AS_TEXT["number"]:
        if nasty.label in valid:
            continue
        call = partial(post_form, client, path, {**IDLE_POLICY, field: nasty.value})
        run_case(outcome, f"{field}={nasty}", call, partial(shown_on_the_page, field=field))
    outcome.assert_none_failed()


def test_the_valid_notification_id_is_marked_read(world, page_client):
    client = page_client(world["lead"])
    notification = world["notification"]

    response = client.post("/monitoring/notifications/read/", {"id": str(notification.pk)})

    assert response.status_code == 302
    notification.refresh_from_db()
    assert notification.read_at is not None


# No id at all is "mark all read" (the page's button sends none); 2**31 and 2**63 - 1 are ids
# a bigint holds (no notification has them: nothing is marked).
NOT_REFUSED_IDS = {"empty", "string-empty", "int32-max-plus-one", "int64-max"}


def test_every_nasty_notification_id_marks_nothing_read(world, page_client):
    client = page_client(world["lead"])
    outcome = Outcome()
    for nasty in SENT_AS_TEXT["number"]:
        if nasty.label in NOT_REFUSED_IDS:
            continue
        call = partial(post_form, client, "/monitoring/notifications/read/", {"id": nasty.value})
        run_case(outcome, f"id={nasty}", call, marks_nothing)
    outcome.assert_none_failed()
