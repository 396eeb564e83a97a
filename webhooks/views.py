"""The team's webhooks page (its leads and portal admins): the list, a form to add one, each
webhook's form and actions (send a test event, rotate the secret, delete), and the recent
deliveries with their status. A new or rotated secret is shown on the answer to that POST
only, never stored anywhere else but the webhook's row."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from tenants.forms import add_service_errors
from tenants.models import Team
from tenants.selectors import teams_visible_to
from webhooks import selectors, services
from webhooks.filtersets import DeliveryFilter
from webhooks.forms import WebhookForm
from webhooks.models import Webhook
from webhooks.permissions import can_manage_webhooks


def _team(request: HttpRequest, slug: str) -> Team:
    """The team (404 when the user may not see it), if they may manage its webhooks (403)."""
    team = get_object_or_404(teams_visible_to(request.user), slug=slug)
    if not can_manage_webhooks(request.user, team):
        raise PermissionDenied("Only the team's leads and portal admins manage its webhooks.")
    return team


def _host(request: HttpRequest) -> dict:
    return {"request_host": request.get_host(), "request_scheme": request.scheme}


def _page(request, team, *, form, secret_of=None, status=200) -> HttpResponse:
    deliveries = DeliveryFilter(request.GET, queryset=selectors.deliveries_of_team(team))
    rows = (
        deliveries.qs[: selectors.RECENT_DELIVERIES]
        if deliveries.is_valid()
        else selectors.deliveries_of_team(team).none()
    )
    return render(
        request,
        "webhooks/team_webhooks.html",
        {
            "team": team,
            "webhooks": list(selectors.webhooks_of_team(team)),
            "form": form,
            "secret_of": secret_of,
            "deliveries": list(rows),
            "filter": deliveries,
        },
        status=status,
    )


@login_required
def team_webhooks(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug)
    form = WebhookForm(request.POST or None, initial={"active": True}, **_host(request))
    if request.method == "POST" and form.is_valid():
        try:
            webhook = services.webhook_create(
                actor=request.user, team=team, **form.cleaned_data, **_host(request)
            )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Webhook {webhook.name} added.")
            fresh = WebhookForm(initial={"active": True})
            return _page(request, team, form=fresh, secret_of=webhook)
    return _page(request, team, form=form, status=400 if form.errors else 200)


def _webhook(request: HttpRequest, slug: str, pk: int) -> Webhook:
    return get_object_or_404(selectors.webhooks_of_team(_team(request, slug)), pk=pk)


@login_required
def webhook_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    webhook = _webhook(request, slug, pk)
    form = WebhookForm.of(webhook, request.POST or None, **_host(request))
    if request.method == "POST" and form.is_valid():
        try:
            services.webhook_update(
                actor=request.user, webhook=webhook, **form.cleaned_data, **_host(request)
            )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Webhook {form.cleaned_data['name']} saved.")
            return redirect("team-webhooks", webhook.team.slug)
    return render(
        request,
        "webhooks/webhook_detail.html",
        {
            "team": webhook.team,
            "webhook": webhook,
            "form": form,
            "deliveries": list(
                selectors.deliveries_of_team(webhook.team).filter(webhook=webhook)[
                    : selectors.RECENT_DELIVERIES
                ]
            ),
        },
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def webhook_test(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    webhook = _webhook(request, slug, pk)
    services.webhook_send_test(actor=request.user, webhook=webhook)
    messages.success(request, f"Test event sent to {webhook.name}; its delivery is below.")
    return redirect("team-webhooks", webhook.team.slug)


@login_required
@require_POST
def webhook_rotate_secret(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    webhook = services.webhook_rotate_secret(
        actor=request.user, webhook=_webhook(request, slug, pk)
    )
    messages.success(request, f"Webhook {webhook.name} has a new secret.")
    fresh = WebhookForm(initial={"active": True})
    return _page(request, webhook.team, form=fresh, secret_of=webhook)


@login_required
@require_POST
def webhook_delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    webhook = _webhook(request, slug, pk)
    services.webhook_delete(actor=request.user, webhook=webhook)
    messages.success(request, f"Webhook {webhook.name} deleted.")
    return redirect("team-webhooks", slug)


@login_required
@require_POST
def delivery_redeliver(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    team = _team(request, slug)
    delivery = get_object_or_404(selectors.deliveries_of_team(team), pk=pk)
    services.delivery_redeliver(actor=request.user, delivery=delivery)
    messages.success(request, f"Delivery #{delivery.pk} sent again as a new delivery.")
    return redirect("team-webhooks", team.slug)
