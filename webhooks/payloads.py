"""The bodies webhooks are sent, built from an event: pure, no database or clock of their own.

* Generic JSON: ``{"event", "team": {"slug", "name"}, "occurred_at", "title", "link", "data"}``.
* Slack-compatible (Slack's incoming webhooks, Mattermost, Rocket.Chat, ...): ``{"text",
  "blocks"}``, the text a line with a link back to the portal, the blocks the same with the
  event's facts as fields.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

GENERIC = "generic"
SLACK = "slack"
# Slack shows at most ten fields in a section.
SLACK_MAX_FIELDS = 10


@dataclass(frozen=True)
class Occurrence:
    """An event as a receiver is told it."""

    kind: str
    team_slug: str
    team_name: str
    title: str
    data: dict[str, Any]
    link: str
    occurred_at: datetime.datetime


def generic_payload(event: Occurrence) -> dict[str, Any]:
    return {
        "event": event.kind,
        "team": {"slug": event.team_slug, "name": event.team_name},
        "occurred_at": event.occurred_at.isoformat(),
        "title": event.title,
        "link": event.link,
        "data": event.data,
    }


def slack_escape(text: str) -> str:
    """Slack's mrkdwn control characters as entities (its documented escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _field_value(value: Any) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def slack_payload(event: Occurrence, *, portal_name: str = "gpu-portal") -> dict[str, Any]:
    title_text = slack_escape(event.title)
    text = f"[{slack_escape(portal_name)}] {title_text}"
    if event.link:
        text += f" <{event.link}|Open in the portal>"
    fields = [
        {"type": "mrkdwn", "text": f"*{slack_escape(key)}*\n{slack_escape(_field_value(value))}"}
        for key, value in list(event.data.items())[:SLACK_MAX_FIELDS]
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{title_text}*"}},
    ]
    if fields:
        blocks.append({"type": "section", "fields": fields})
    team = f"{slack_escape(event.team_name)} ({slack_escape(event.team_slug)})"
    context = f"{slack_escape(event.kind)} · team {team}"
    context += f" · {event.occurred_at.isoformat(timespec='seconds')}"
    if event.link:
        context += f" · <{event.link}|Open in the portal>"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": text, "blocks": blocks}


def build_payload(fmt: str, *, portal_name: str = "gpu-portal", **event: Any) -> dict[str, Any]:
    """The body for a webhook of format ``fmt`` (``slack`` or ``generic``)."""
    if fmt == SLACK:
        return slack_payload(Occurrence(**event), portal_name=portal_name)
    if fmt == GENERIC:
        return generic_payload(Occurrence(**event))
    raise ValueError(f"unknown webhook format {fmt!r}")


def body_bytes(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed): compact JSON in UTF-8, keys sorted."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
