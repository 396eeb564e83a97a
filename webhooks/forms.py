"""The page's webhook form: shapes only; ``webhooks.services`` checks the rest (the URL too)
and its errors are shown beside the fields."""

from django import forms

from tenants.events import EventKind
from webhooks.models import Webhook
from webhooks.targets import MAX_URL_LENGTH, url_refusal


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

    def __init__(
        self, *args, request_host: str | None = None, request_scheme: str = "http", **kwargs
    ):
        super().__init__(*args, **kwargs)
        self.request_host, self.request_scheme = request_host, request_scheme

    def clean_url(self) -> str:
        # The service checks again; here so that the form shows every bad field at once.
        url = self.cleaned_data["url"]
        refusal = url_refusal(
            url, request_host=self.request_host, request_scheme=self.request_scheme
        )
        if refusal:
            raise forms.ValidationError(refusal)
        return url

    @classmethod
    def of(cls, webhook: Webhook, data=None, **kwargs) -> "WebhookForm":
        initial = {f: getattr(webhook, f) for f in ("name", "url", "format", "events", "active")}
        return cls(data, initial=initial, **kwargs)
