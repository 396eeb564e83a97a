import datetime

from django import forms
from django.conf import settings

from accounts.models import ApiToken


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, required=False, help_text="What the token is for, e.g. “CI pipeline”."
    )
    scope = forms.ChoiceField(
        choices=ApiToken.Scope.choices,
        initial=ApiToken.Scope.READ_WRITE,
        required=False,
        help_text="A read-only token can read everything you can, and change nothing: for "
        "dashboards and scripts that only look.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The bounds are settings, read when the form is made rather than when it is defined.
        self.fields["expires_in_days"] = forms.IntegerField(
            label="Expires in (days)",
            min_value=1,
            max_value=settings.PORTAL_API_TOKEN_MAX_DAYS,
            initial=settings.PORTAL_API_TOKEN_DAYS,
        )

    def clean_scope(self) -> str:
        return self.cleaned_data["scope"] or ApiToken.Scope.READ_WRITE

    @property
    def lifetime(self) -> datetime.timedelta:
        return datetime.timedelta(days=self.cleaned_data["expires_in_days"])
