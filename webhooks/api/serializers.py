"""What the webhooks API takes and sends. The rules (who may, which URLs) are in
``webhooks.services`` and ``webhooks.targets``; these check the shape."""

from rest_framework import serializers

from tenants.events import EventKind
from webhooks.models import Delivery, Webhook
from webhooks.targets import MAX_URL_LENGTH, url_refusal


class WebhookSerializer(serializers.ModelSerializer):
    events = serializers.ListField(child=serializers.ChoiceField(choices=EventKind.choices))
    secret_hint = serializers.CharField(read_only=True, help_text="The secret's last characters.")

    class Meta:
        model = Webhook
        fields = [
            "id", "name", "url", "format", "events", "active", "secret_hint",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


class WebhookWithSecretSerializer(WebhookSerializer):
    """A webhook just made, or its secret just rotated: the only answers that hold the
    secret."""

    secret = serializers.CharField(read_only=True)

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    url = serializers.CharField(
        max_length=MAX_URL_LENGTH,
        trim_whitespace=False,
        help_text="http:// or https://, not the portal itself.",
    )
    format = serializers.ChoiceField(choices=Webhook.Format.choices, required=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EventKind.choices), allow_empty=False
    )
    active = serializers.BooleanField(required=False)

    def validate_url(self, value: str) -> str:
        # The service checks again; here so that one answer names every bad field.
        request = self.context.get("request")
        refusal = url_refusal(
            value,
            request_host=request.get_host() if request else None,
            request_scheme=request.scheme if request else "http",
        )
        if refusal:
            raise serializers.ValidationError(refusal)
        return value


class WebhookChangeSerializer(WebhookWriteSerializer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False


class DeliverySerializer(serializers.ModelSerializer):
    webhook_name = serializers.CharField(source="webhook.name", read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id", "webhook", "webhook_name", "event", "status", "attempts", "response_code",
            "error", "created_at", "last_attempt_at", "next_attempt_at", "delivered_at",
            "payload",
        ]  # fmt: skip
        read_only_fields = fields
