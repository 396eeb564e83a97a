"""The audit log page, and the readable changes it and the grant page show for each event."""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from clusters.models import Cluster
from core.params import page_of
from tenants import selectors
from tenants.filtersets import AuditEventFilter
from tenants.models import AuditEvent, Team

AUDIT_PAGE_SIZE = 25

FIELD_LABELS = {
    "team_id": "team",
    "cluster_id": "cluster",
    "user_id": "user",
    "gpu_resource": "GPU kind",
    "gpus": "GPUs",
    "cpu_cores": "CPU cores",
    "memory_gib": "memory (GiB)",
    "starts_on": "start",
    "ends_on": "end",
    "decision_note": "decision note",
    "archived_at": "archived",
    "overcommit_ratio": "overcommit ratio",
    "resource_name": "GPU kind",
    "gpu_model": "GPU model",
    "admin_cap": "admin cap",
}


@dataclass(frozen=True)
class Change:
    field: str
    before: str | None
    after: str | None


def describe_events(events: list[AuditEvent]) -> None:
    """Give each event ``changes``: readable field names and values, ids resolved to names;
    for an update only the fields that changed, for a create or delete every field."""
    ids: dict[str, set] = {"team_id": set(), "cluster_id": set(), "user_id": set()}
    for event in events:
        for snapshot in (event.before or {}, event.after or {}):
            for key, seen in ids.items():
                if snapshot.get(key) is not None:
                    seen.add(snapshot[key])
    names: dict[str, dict[Any, str]] = {
        "team_id": {e.team_id: e.team.slug for e in events if e.team_id is not None},
        "cluster_id": {},
        "user_id": {},
    }
    if ids["team_id"] - names["team_id"].keys():
        names["team_id"].update(
            Team.objects.filter(pk__in=ids["team_id"]).values_list("pk", "slug")
        )
    if ids["cluster_id"]:
        names["cluster_id"] = dict(
            Cluster.objects.filter(pk__in=ids["cluster_id"]).values_list("pk", "name")
        )
    if ids["user_id"]:
        names["user_id"] = dict(
            User.objects.filter(pk__in=ids["user_id"]).values_list("pk", "username")
        )

    def show(key: str, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if key in names:
            return names[key].get(value) or f"#{value}"
        return str(value)

    for event in events:
        before, after = event.before or {}, event.after or {}
        changes = []
        is_update = event.before is not None and event.after is not None
        for key in dict.fromkeys([*before, *after]):
            if is_update and before.get(key) == after.get(key):
                continue
            if not is_update and before.get(key) in (None, "") and after.get(key) in (None, ""):
                continue  # a created or deleted row: its empty fields say nothing
            changes.append(
                Change(
                    field=FIELD_LABELS.get(key, key.replace("_", " ")),
                    before=show(key, before.get(key)),
                    after=show(key, after.get(key)),
                )
            )
        event.changes = changes


def _target_url(event: AuditEvent) -> str | None:
    if event.target_type == "QuotaGrant":
        return reverse("grant-detail", args=[event.target_id])
    if event.target_type == "QuotaRequest" and event.team is not None:
        return reverse("team-detail", args=[event.team.slug]) + f"#request-{event.target_id}"
    if event.target_type == "Team" and event.team is not None:
        return reverse("team-detail", args=[event.team.slug])
    return None


@login_required
def audit_list(request: HttpRequest) -> HttpResponse:
    filterset = AuditEventFilter(
        request.GET,
        queryset=selectors.audit_events_visible_to(request.user).order_by("-created_at", "-id"),
        request=request,
        teams=selectors.teams_visible_to(request.user).order_by("name", "slug"),
    )
    page = page_of(request, filterset.page_rows(), AUDIT_PAGE_SIZE)
    page_events = list(page.object_list)
    describe_events(page_events)
    for event in page_events:
        event.target_url = _target_url(event)
    return render(
        request,
        "tenants/audit_list.html",
        {"filter_form": filterset.form, "page": page, "events": page_events},
    )
