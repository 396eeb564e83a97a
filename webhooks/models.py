"""A team's webhooks and what was sent to them."""

from django.db import models
from django.db.models import Q

from tenants.models import Team


class Webhook(models.Model):
    """One URL a team's events are POSTed to, in Slack's or a generic JSON format, signed with
    the webhook's secret."""

    class Format(models.TextChoices):
        SLACK = "slack", "Slack-compatible (text and blocks)"
        GENERIC = "generic", "Generic JSON"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=100)
    url = models.CharField(max_length=2000)  # checked by webhooks.targets
    format = models.CharField(max_length=10, choices=Format.choices, default=Format.GENERIC)
    # Event kinds (``tenants.events.EventKind`` values) the webhook is sent.
    events = models.JSONField(default=list)
    # The HMAC key of the signatures. It must be kept as it is to sign with it: it is shown once,
    # when made or rotated, and never in a list.
    secret = models.CharField(max_length=100)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="webhook_team_name_unique"),
            models.CheckConstraint(
                condition=Q(format__in=["slack", "generic"]), name="webhook_format_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.name}"

    @property
    def secret_hint(self) -> str:
        return f"…{self.secret[-4:]}" if self.secret else ""

    def wants(self, kind: str) -> bool:
        return self.active and kind in self.events


# What a test delivery's event is called: not an EventKind, as nobody subscribes to it.
TEST_EVENT = "webhook.test"


class Delivery(models.Model):
    """One event sent (or to be sent) to one webhook: the body as built when the event
    happened, and how the attempts went."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=50)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "sending", "succeeded", "failed"]),
                name="delivery_status_known",
            ),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]

    def __str__(self) -> str:
        return f"{self.event} -> {self.webhook} ({self.status})"
