"""Reads of webhooks and their deliveries for the API and the page."""

from django.db.models import QuerySet

from tenants.models import Team
from webhooks.models import Delivery, Webhook

RECENT_DELIVERIES = 50


def webhooks_of_team(team: Team) -> QuerySet[Webhook]:
    return Webhook.objects.filter(team=team).select_related("team").order_by("name", "pk")


def deliveries_of_team(team: Team) -> QuerySet[Delivery]:
    return (
        Delivery.objects.filter(webhook__team=team)
        .select_related("webhook", "webhook__team")
        .order_by("-created_at", "-pk")
    )
