"""The bodies webhooks are sent: generic JSON and Slack's text and blocks, built from an event."""

import datetime
import json

import pytest

from webhooks.payloads import (
    SLACK_MAX_FIELDS,
    Occurrence,
    body_bytes,
    build_payload,
    generic_payload,
    slack_escape,
    slack_payload,
)

AT = datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)
EVENT = {
    "kind": "gpu_job.failed",
    "team_slug": "vision",
    "team_name": "Vision & Co",
    "title": "Job #7 train of vision failed on dev (BackoffLimitExceeded)",
    "data": {"job_id": 7, "exit_code": 137, "reason": "BackoffLimitExceeded"},
    "link": "https://portal.example.com/jobs/7/",
    "occurred_at": AT,
}


def test_generic_payload_names_event_team_time_and_data():
    assert generic_payload(Occurrence(**EVENT)) == {
        "event": "gpu_job.failed",
        "team": {"slug": "vision", "name": "Vision & Co"},
        "occurred_at": "2026-03-04T05:06:07+00:00",
        "title": EVENT["title"],
        "link": "https://portal.example.com/jobs/7/",
        "data": {"job_id": 7, "exit_code": 137, "reason": "BackoffLimitExceeded"},
    }


def test_slack_text_is_the_title_with_a_link_to_the_portal():
    payload = slack_payload(Occurrence(**EVENT), portal_name="gpu-portal")
    assert payload["text"] == (
        "[gpu-portal] Job #7 train of vision failed on dev (BackoffLimitExceeded) "
        "<https://portal.example.com/jobs/7/|Open in the portal>"
    )


def test_slack_blocks_hold_title_facts_and_context():
    blocks = slack_payload(Occurrence(**EVENT))["blocks"]
    assert [b["type"] for b in blocks] == ["section", "section", "context"]
    assert blocks[0]["text"] == {"type": "mrkdwn", "text": f"*{EVENT['title']}*"}
    assert {"type": "mrkdwn", "text": "*exit_code*\n137"} in blocks[1]["fields"]
    context = blocks[2]["elements"][0]["text"]
    assert "gpu_job.failed" in context
    assert "team Vision &amp; Co (vision)" in context


def test_slack_escapes_its_control_characters_in_event_text():
    payload = slack_payload(Occurrence(**{**EVENT, "title": "a <b> & <!channel>"}))
    assert "<!channel>" not in payload["text"]
    assert "a &lt;b&gt; &amp; &lt;!channel&gt;" in payload["text"]
    assert slack_escape("<&>") == "&lt;&amp;&gt;"


def test_slack_shows_at_most_ten_fields():
    data = {f"k{i}": i for i in range(25)}
    fields = slack_payload(Occurrence(**{**EVENT, "data": data}))["blocks"][1]["fields"]
    assert len(fields) == SLACK_MAX_FIELDS


def test_slack_without_data_or_link_has_no_fields_section_nor_link():
    payload = slack_payload(Occurrence(**{**EVENT, "data": {}, "link": ""}))
    assert [b["type"] for b in payload["blocks"]] == ["section", "context"]
    assert "<" not in payload["text"]


def test_build_payload_picks_the_format():
    assert build_payload("generic", **EVENT) == generic_payload(Occurrence(**EVENT))
    assert build_payload("slack", portal_name="p", **EVENT) == slack_payload(
        Occurrence(**EVENT), portal_name="p"
    )
    with pytest.raises(ValueError, match="unknown webhook format"):
        build_payload("xml", **EVENT)


def test_body_bytes_are_compact_sorted_utf8_json():
    body = body_bytes({"b": "é", "a": [1, 2]})
    assert body == '{"a":[1,2],"b":"é"}'.encode()
    assert json.loads(body) == {"a": [1, 2], "b": "é"}
