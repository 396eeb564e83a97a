"""Forms for monitoring pages and API query strings: they parse input into a window, a report
period or a policy; the rules live in ``idle`` and ``usage``."""

from __future__ import annotations

import datetime

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from monitoring import promql, reports
from tenants.models import Department
from tenants.selectors import departments_visible_to

MAX_WINDOW = datetime.timedelta(days=400)  # Prometheus keeps 400 days in the devcluster
MAX_REPORT_SPAN = datetime.timedelta(days=3660)  # ten years
WINDOW_CHOICES = [
    ("1h", "Last hour"),
    ("6h", "Last 6 hours"),
    ("24h", "Last 24 hours"),
    ("7d", "Last 7 days"),
    ("custom", "Custom"),
]


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, attrs=None):
        super().__init__(attrs=attrs, format="%Y-%m-%dT%H:%M")


class WindowForm(forms.Form):
    """``?window=6h``, or ``?window=custom&start=...&end=...`` (local times or ISO 8601)."""

    window = forms.ChoiceField(choices=WINDOW_CHOICES, required=False, initial="1h")
    start = forms.DateTimeField(required=False, widget=DateTimeLocalInput())
    end = forms.DateTimeField(required=False, widget=DateTimeLocalInput())

    def __init__(self, data=None, *, now: datetime.datetime | None = None, **kwargs):
        super().__init__(data, **kwargs)
        self.now = now or timezone.now()

    def _in_range(self, moment: datetime.datetime | None) -> datetime.datetime | None:
        """A start or end no further from now than the metrics kept (``MAX_WINDOW``); an end
        ahead of now is read as now."""
        if moment is not None and abs(moment - self.now) > MAX_WINDOW:
            raise ValidationError(f"Must be within {MAX_WINDOW.days} days of now.")
        return moment

    def clean_start(self):
        return self._in_range(self.cleaned_data.get("start"))

    def clean_end(self):
        return self._in_range(self.cleaned_data.get("end"))

    def clean(self):
        data = super().clean()
        name = data.get("window") or "1h"
        data["window"] = name
        if name != "custom":
            return data
        start, end = data.get("start"), data.get("end") or self.now
        if start is None:
            self.add_error("start", "A custom window needs a start.")
            return data
        end = min(end, self.now)
        if end <= start:
            self.add_error("end", "The window must end after it starts, and start in the past.")
        elif end - start > MAX_WINDOW:
            self.add_error("start", f"A window may span at most {MAX_WINDOW.days} days.")
        else:
            data["end"] = end
        return data

    @property
    def window_value(self) -> promql.Window:
        """The chosen window; the last hour when the input was missing or invalid."""
        if not self.is_bound or not self.is_valid():
            return promql.preset_window("1h", self.now)
        data = self.cleaned_data
        if data["window"] == "custom":
            return promql.Window(start=data["start"], end=data["end"], label="custom")
        return promql.preset_window(data["window"], self.now)


def _moment(value: str, *, end: bool) -> datetime.datetime:
    """A date (the start of that day, or for an end the start of the next) or a date-time."""
    value = value.strip()
    tz = timezone.get_current_timezone()
    # parse_* answer None for what is not shaped like a date, and raise for a date that does
    # not exist (2030-02-30); the day after 9999-12-31 does not exist either.
    try:
        day = parse_date(value) if len(value) == 10 else None
        if day is not None:
            if end:
                day += datetime.timedelta(days=1)
            return datetime.datetime.combine(day, datetime.time(), tzinfo=tz)
        moment = parse_datetime(value)
        if moment is not None and not timezone.is_aware(moment):
            moment = timezone.make_aware(moment, tz)
    except (ValueError, OverflowError):
        moment = None
    if moment is None:
        raise ValidationError("Enter a date (YYYY-MM-DD) or a date and time (ISO 8601).")
    return moment


class UsageReportForm(forms.Form):
    """A report period: ``start`` and ``end`` as dates (both days included) or date-times (the
    end excluded), split by ``bucket``, of a ``department``'s teams or of every visible team.
    Defaults to this month so far. Its cleaned data are ``usage.usage_report``'s arguments."""

    start = forms.CharField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.CharField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    bucket = forms.ChoiceField(
        required=False,
        choices=[(b, b.capitalize()) for b in reports.BUCKETS],
        initial="month",
        label="Per",
    )
    department = forms.CharField(
        required=False,
        widget=forms.HiddenInput,
        help_text="A department's slug: only its teams (nested departments' included).",
    )

    def __init__(self, data=None, *, now: datetime.datetime | None = None, user=None, **kwargs):
        super().__init__(data, **kwargs)
        self.now = now or timezone.now()
        self.user = user

    def clean_department(self) -> Department | None:
        slug = self.cleaned_data.get("department")
        if not slug:
            return None
        # Departments the user may not see read as unknown: the answer never says they exist.
        visible = departments_visible_to(self.user) if self.user else Department.objects.none()
        department = visible.filter(slug=slug).first()
        if department is None:
            raise ValidationError(f"No department with slug {slug!r}.")
        return department

    def clean_start(self) -> datetime.datetime:
        value = self.cleaned_data.get("start")
        if not value:
            today = timezone.localdate(self.now)
            return datetime.datetime.combine(
                today.replace(day=1), datetime.time(), tzinfo=timezone.get_current_timezone()
            )
        return _moment(value, end=False)

    def clean_end(self) -> datetime.datetime:
        value = self.cleaned_data.get("end")
        return _moment(value, end=True) if value else self.now

    def clean(self):
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        data["bucket"] = data.get("bucket") or "month"
        if start is None or end is None:
            return data
        # Each error names the field to change, for the page and the API's 400 alike.
        if start >= self.now:
            self.add_error("start", "The report must start in the past.")
            return data
        if end <= start:
            self.add_error("end", "The report must end after it starts.")
            return data
        tomorrow = timezone.localdate(self.now) + datetime.timedelta(days=1)
        tz = timezone.get_current_timezone()
        if end > datetime.datetime.combine(tomorrow, datetime.time(), tzinfo=tz):
            self.add_error("end", "The report may end today at the latest.")
            return data
        if end - start > MAX_REPORT_SPAN:
            self.add_error("start", f"A report may span at most {MAX_REPORT_SPAN.days} days.")
            return data
        try:
            reports.periods(start, end, data["bucket"])
        except ValueError as error:
            self.add_error("bucket", str(error))
        return data


class IdlePolicyForm(forms.Form):
    notify_leads = forms.BooleanField(required=False, label="Notify the team's leads")
    stop_after_minutes = forms.IntegerField(
        required=False,
        min_value=10,
        max_value=60 * 24 * 30,
        label="Stop portal jobs idle for (minutes)",
        help_text="Leave empty to never stop idle jobs.",
    )
    warn_minutes_before_stop = forms.IntegerField(
        min_value=1, max_value=60 * 24, initial=15, label="Warn this many minutes before"
    )


class IdleServicesPolicyForm(forms.Form):
    """Whether the idle policy stops inference services too: posted with ``IdlePolicyForm``."""

    stop_services = forms.BooleanField(
        required=False,
        label="Stop idle inference services too (scaled to zero)",
        help_text="Off: an idle service is reported to the leads, never stopped.",
    )
