"""The page's webhook form: shapes only; ``webhooks.services`` checks the rest (the URL too)
and its errors are shown beside the fields."""

from django import forms

from tenants.events import EventKind
from webhooks.models import Webhook
from webhooks.targets import MAX_URL_LENGTH


class WebhookForm(forms.Form):
    name = forms.CharField(max_length=100)
    url = forms.CharField(
        label="URL",
        max_length=MAX_URL_LENGTH,
        help_text="Where the events are POSTed: http:// or https://, not the portal itself.",
    )
    format = forms.ChoiceField(choices=Webhook.Format.choices, initial=Webhook.Format.GENERIC)
    events = forms.MultipleChoiceField(
        choices=EventKind.choices, widget=forms.CheckboxSelectMultiple
    )
    active = forms.BooleanField(required=False, initial=True)

    @classmethod
    def of(cls, webhook: Webhook, data=None) -> "WebhookForm":
        initial = {f: getattr(webhook, f) for f in ("name", "url", "format", "events", "active")}
        return cls(data, initial=initial)
