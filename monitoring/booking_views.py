"""The booking calendar page: a cluster's GPUs of a model day by day (capacity, granted, pending,
free) as a chart; the earliest window for N GPUs for K days; and a booking form that files a
normal quota request for one of the lead's teams (it goes to review like any other).

Thin: ``tenants.bookings`` reads the figures, ``tenants.quota`` files the request,
``monitoring.figures`` draws the chart. Bad input is a form error, never a 500."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.gzip import gzip_page

from monitoring import figures
from monitoring.booking_forms import (
    BookingForm,
    CalendarForm,
    WindowSearchForm,
    teams_booking_for,
)
from monitoring.parts import Chart
from tenants import bookings, quota
from tenants.forms import add_service_errors

WINDOW_PREFIX = "find"


@gzip_page
@login_required
def booking_calendar(request: HttpRequest) -> HttpResponse:
    today = timezone.localdate()
    pick = CalendarForm(request.GET or None)
    pool = pick.pool() if not pick.is_bound or pick.is_valid() else None
    calendar = None
    if pool is not None and pool["cluster"] is not None:
        try:
            calendar = bookings.booking_calendar(
                today=today,
                first=pick.cleaned_data.get("start") if pick.is_bound else None,
                last=pick.cleaned_data.get("end") if pick.is_bound else None,
                **pool,
            )
        except ValidationError as error:
            add_service_errors(pick, error)

    search = WindowSearchForm(
        request.GET if f"{WINDOW_PREFIX}-gpus" in request.GET else None, prefix=WINDOW_PREFIX
    )
    window, window_words = None, ""
    if calendar is not None and search.is_bound and search.is_valid():
        gpus, days = search.cleaned_data["gpus"], search.cleaned_data["days"]
        try:
            window = bookings.earliest_window(
                today=today,
                gpus=gpus,
                days=days,
                not_before=calendar.first,
                **pool,
            )
        except ValidationError as error:
            add_service_errors(search, error)
        else:
            window_words = bookings.window_words(window, gpus=gpus, days=days)

    booking = _booking_form(request, window=window, search=search, today=today)
    if request.method == "POST" and calendar is not None and booking.is_valid():
        done = _book(request, booking, pool)
        if done is not None:
            return done

    context = {
        "pick": pick,
        "calendar": calendar,
        "chart": _chart(calendar) if calendar is not None else None,
        "search": search,
        "window": window,
        "window_words": window_words,
        "booking": booking,
        "query": urlencode({k: v for k, v in request.GET.items() if k in pick.fields}),
    }
    return render(request, "monitoring/booking_calendar.html", context)


def _booking_form(request: HttpRequest, *, window, search, today) -> BookingForm:
    if request.method == "POST":
        return BookingForm(request.POST, user=request.user)
    initial = {"starts_on": today}
    if window is not None:
        initial = {"gpus": window.gpus, "starts_on": window.starts_on, "ends_on": window.ends_on}
    elif search.is_bound and search.is_valid():
        initial["gpus"] = search.cleaned_data["gpus"]
    first = teams_booking_for(request.user).first()
    if first is not None:
        initial["team"] = first.slug
    return BookingForm(initial=initial, user=request.user)


def _book(request: HttpRequest, booking: BookingForm, pool: dict) -> HttpResponse | None:
    """File the booking as a quota request; the redirect to the team's page, or None with the
    service's errors on the form."""
    data = booking.cleaned_data
    try:
        quota_request = quota.quota_request_create(
            requested_by=request.user,
            team=data["team"],
            gpus=data["gpus"],
            starts_on=data["starts_on"],
            ends_on=data["ends_on"],
            justification=data["justification"],
            **pool,
        )
    except ValidationError as error:
        add_service_errors(booking, error)
        return None
    except PermissionDenied as error:
        booking.add_error("team", str(error))
        return None
    what = quota_request.gpu_model or quota_request.gpu_resource
    messages.success(
        request,
        f"Requested {quota_request.gpus} × {what} on {quota_request.cluster} from "
        f"{quota_request.starts_on.isoformat()} to {quota_request.ends_on.isoformat()}. An "
        "admin will review it.",
    )
    return redirect("team-detail", slug=quota_request.team.slug)


def _chart(calendar: bookings.Calendar) -> Chart:
    pool = calendar.pool
    what = pool.gpu_model or f"{pool.gpu_resource} (any model)"
    title = f"{what} on {pool.cluster}"
    figure = figures.booking_calendar(
        [d.day for d in calendar.days],
        granted=[d.granted for d in calendar.days],
        free=[d.free for d in calendar.days],
        pending=[d.pending for d in calendar.days],
        plannable=pool.plannable,
        title=title,
    )
    return Chart.drawn("booking-calendar", title, figure, empty="No days to show.")
