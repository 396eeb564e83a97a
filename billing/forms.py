"""Query strings of the statement page and API: which months."""

from __future__ import annotations

import datetime

from django import forms
from django.utils import timezone

MAX_MONTHS = 24


class StatementForm(forms.Form):
    month = forms.CharField(
        required=False, help_text="The first month, YYYY-MM (default: this month)."
    )
    months = forms.IntegerField(required=False, min_value=1, max_value=MAX_MONTHS)

    def clean_month(self) -> datetime.date:
        value = self.cleaned_data.get("month")
        if not value:
            return timezone.localdate().replace(day=1)
        try:
            return datetime.datetime.strptime(value, "%Y-%m").date()
        except ValueError:
            raise forms.ValidationError(f"A month, YYYY-MM ({value!r} was given).") from None

    def clean_months(self) -> int:
        return self.cleaned_data.get("months") or 1


class PriceForm(forms.Form):
    """An admin's new price; ``billing.prices.price_set`` checks the values."""

    gpu_model = forms.CharField(required=False, max_length=200, help_text="Empty: any model.")
    effective_from = forms.CharField(help_text="A month's first day, YYYY-MM-01.")
    gpu_hour = forms.CharField(label="Per GPU-hour", help_text="At most 4 decimal places.")
    cpu_core_hour = forms.CharField(label="Per CPU core-hour", required=False)
    memory_gib_hour = forms.CharField(label="Per GiB-hour of memory", required=False)


class BudgetForm(forms.Form):
    """An admin's budget for a team; ``billing.budgets.budget_set`` checks the values."""

    period = forms.ChoiceField(choices=[("month", "Month"), ("quarter", "Quarter")])
    gpu_model = forms.CharField(required=False, max_length=200, help_text="Empty: every model.")
    gpu_hours = forms.CharField(label="GPU-hours", help_text="Not negative.")
    policy = forms.ChoiceField(
        choices=[
            ("refuse", "Refuse new work"),
            ("opportunistic", "Accept only opportunistic work (Kueue)"),
        ]
    )
