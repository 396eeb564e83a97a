"""Parsing a chart window and a report period from a query string."""

import datetime

import pytest

from monitoring.forms import UsageReportForm, WindowForm

UTC = datetime.UTC
NOW = datetime.datetime(2026, 3, 15, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _utc(settings):
    settings.TIME_ZONE = "UTC"


def test_a_preset_window_ends_now():
    window = WindowForm({"window": "6h"}, now=NOW).window_value
    assert (window.label, window.end, window.seconds) == ("6h", NOW, 6 * 3600)


def test_no_choice_is_the_last_hour():
    assert WindowForm(None, now=NOW).window_value.label == "1h"


def test_a_custom_window_takes_its_bounds_and_never_ends_in_the_future():
    form = WindowForm(
        {"window": "custom", "start": "2026-03-14T08:00", "end": "2026-03-20T00:00"}, now=NOW
    )
    window = form.window_value
    assert window.start == datetime.datetime(2026, 3, 14, 8, tzinfo=UTC)
    assert window.end == NOW


def test_a_custom_window_without_a_start_falls_back_to_the_last_hour_with_an_error():
    form = WindowForm({"window": "custom"}, now=NOW)
    assert not form.is_valid()
    assert "start" in form.errors
    assert form.window_value.label == "1h"


def test_an_unknown_preset_is_an_error():
    form = WindowForm({"window": "3y"}, now=NOW)
    assert not form.is_valid()
    assert form.window_value.label == "1h"


def test_report_dates_include_both_days():
    form = UsageReportForm({"start": "2026-03-01", "end": "2026-03-02", "bucket": "day"}, now=NOW)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["start"] == datetime.datetime(2026, 3, 1, tzinfo=UTC)
    assert form.cleaned_data["end"] == datetime.datetime(2026, 3, 3, tzinfo=UTC)


def test_report_date_times_are_taken_as_they_are():
    form = UsageReportForm(
        {"start": "2026-03-01T06:30:00Z", "end": "2026-03-01T07:00:00+00:00"}, now=NOW
    )
    assert form.is_valid(), form.errors
    assert form.cleaned_data["end"] - form.cleaned_data["start"] == datetime.timedelta(minutes=30)
    assert form.cleaned_data["bucket"] == "month"


def test_report_defaults_to_this_month_so_far():
    form = UsageReportForm({}, now=NOW)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["start"] == datetime.datetime(2026, 3, 1, tzinfo=UTC)
    assert form.cleaned_data["end"] == NOW


@pytest.mark.parametrize(
    "data",
    [
        {"start": "2026-03-05", "end": "2026-03-01"},
        {"start": "yesterday"},
        {"start": "2026-04-01"},
        {"start": "2020-01-01", "bucket": "day"},
    ],
)
def test_bad_report_periods_are_refused(data):
    assert not UsageReportForm(data, now=NOW).is_valid()
