"""Reading pages in tests."""

import json
import re

from django.forms.models import model_to_dict
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


def cluster_change_form(cluster, **changes) -> dict:
    """The Django admin's change form of a cluster as posted unchanged, then ``changes``."""
    data = {
        key: value
        for key, value in model_to_dict(cluster).items()
        if key not in ("id", "gpu_node_selector", "allowed_registries") and value is not None
    }
    data["gpu_node_selector"] = '{"hardware-type": "gpu"}'
    data["allowed_registries"] = "[]"
    for key in ("reserved_namespaces", "allowed_priority_classes"):
        data[key] = json.dumps(getattr(cluster, key))
    for inline in ("gpu_capacities", "gpu_model_capacities"):
        data.update(
            {
                f"{inline}-TOTAL_FORMS": "0",
                f"{inline}-INITIAL_FORMS": "0",
                f"{inline}-MIN_NUM_FORMS": "0",
                f"{inline}-MAX_NUM_FORMS": "1000",
            }
        )
    data.update(changes)
    return data


def queueing_form(quota_mode: str, **fields) -> dict:
    """The cluster queueing page's settings form as a browser sends it: ``quota_mode`` and
    every borrowing field at its default, but for ``fields`` (a checkbox: "on", or left out)."""
    sent = {
        "quota_mode": quota_mode,
        "fair_share_half_life_hours": 0,
        "fair_share_usage_scale_gpu_hours": 100,
        "borrower_min_runtime_seconds": 0,
        "lender_wait_bound_seconds": 1800,
        "preemption_grace_seconds": 30,
    }
    return {**sent, **fields}
