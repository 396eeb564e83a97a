"""Reading pages in tests."""

import re

from django.test import Client


def field_error_html(response, field_id: str) -> str:
    """The rendered error list next to the field with this HTML id ('' when there is none)."""
    match = re.search(
        rf'<ul class="errorlist"[^>]*id="{re.escape(field_id)}_error"[^>]*>(.*?)</ul>',
        response.content.decode(),
        re.S,
    )
    return match.group(1) if match else ""


def messages_text(response) -> list[str]:
    """The django messages shown on a rendered page."""
    return [str(m) for m in response.context["messages"]] if response.context else []


def get_ok(client: Client, url: str):
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response
