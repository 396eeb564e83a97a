"""The job pages: list, submit form, and a detail page that follows the job live (htmx polls
small fragments: state, log, events) and shows its GPUs' utilisation from ``monitoring``.

Thin: ``selectors`` decide which jobs a user sees (another team's job is a 404), ``services``
make every change, ``cluster_reads`` fetch logs and events.
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from gpujobs import cluster_reads, queue_reads, selectors, services
from gpujobs.filtersets import GpuJobFilter
from gpujobs.forms import JobForm, add_job_errors
from gpujobs.models import GpuJob
from gpujobs.permissions import can_stop_job
from tenants.errors import InvalidTransition
from workloads.pages import (
    LOG_TAIL_CHOICES,
    cluster_read_fragment,
    create_form_page,
    fragment,
    list_page,
    log_tail_choice,
)


def _visible_job(request: HttpRequest, pk: int) -> GpuJob:
    """The job, or 404 when the user may not see it (never a 403 that confirms it exists)."""
    return get_object_or_404(selectors.jobs_visible_to(request.user), pk=pk)


# --- list --------------------------------------------------------------------------------------


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    return list_page(
        request,
        filter_class=GpuJobFilter,
        rows=selectors.jobs_visible_to(request.user).order_by("-created_at", "-id"),
        template="gpujobs/job_list.html",
        items="jobs",
        can_create="can_submit",
    )


# --- submit ------------------------------------------------------------------------------------


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    return create_form_page(
        request,
        form_class=JobForm,
        url_name="gpujob-new",
        template="gpujobs/job_form.html",
        refusal="Only leads and members of a team can run jobs.",
        create=lambda form: services.job_submit(
            user=request.user,
            team=form.cleaned_data["team"],
            cluster=form.cleaned_data["cluster"],
            job_request=form.job_request,
        ),
        add_errors=add_job_errors,
        done=lambda job: f"Submitted job #{job.pk} {job.name}.",
        detail_url_name="gpujob-detail",
    )


# --- one job -----------------------------------------------------------------------------------


def _live_context(request: HttpRequest, job: GpuJob) -> dict:
    return {
        "job": job,
        "refresh_seconds": settings.GPUJOBS_REFRESH_SECONDS,
        "can_stop": not job.is_final and can_stop_job(request.user, job),
        "queue_status": queue_reads.queue_status(job),
    }


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)
    context = _live_context(request, job)
    context["tail"] = log_tail_choice(request)
    context["tail_choices"] = LOG_TAIL_CHOICES
    return render(request, "gpujobs/job_detail.html", context)


@login_required
def job_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The state panel alone (htmx polls it until the job ends)."""
    job = _visible_job(request, pk)
    return fragment(request, "gpujobs/_job_live.html", _live_context(request, job))


@login_required
def job_logs(request: HttpRequest, pk: int) -> HttpResponse:
    """The log panel: the last lines of the newest pod's GPU container."""
    job = _visible_job(request, pk)
    tail = log_tail_choice(request)
    return cluster_read_fragment(
        request,
        "gpujobs/_job_logs.html",
        {"job": job, "tail": tail, "refresh_seconds": settings.GPUJOBS_REFRESH_SECONDS},
        result=lambda: cluster_reads.job_log(job, tail=tail),
    )


@login_required
def job_events(request: HttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)
    return cluster_read_fragment(
        request,
        "gpujobs/_job_events.html",
        {"job": job, "refresh_seconds": settings.GPUJOBS_REFRESH_SECONDS * 3},
        events=lambda: cluster_reads.job_events(job),
    )


@login_required
def job_gpus(request: HttpRequest, pk: int) -> HttpResponse:
    """The job's GPU charts, from ``monitoring`` over the job's run (the last hour of it)."""
    job = _visible_job(request, pk)
    context: dict = {"job": job}
    try:
        from monitoring import dashboards, promql
    except ImportError:  # the monitoring app is optional for the job pages
        context["unavailable"] = "GPU monitoring is not installed in this portal."
        return fragment(request, "gpujobs/_job_gpus.html", context)
    if not job.cluster.prometheus_url:
        context["unavailable"] = (
            f"Cluster {job.cluster.name} has no Prometheus URL, so there are no GPU metrics."
        )
    elif not job.pods or job.started_at is None:
        context["unavailable"] = "The job has not run yet: no GPU metrics."
    else:
        end = job.finished_at or timezone.now()
        start = max(
            job.started_at - datetime.timedelta(minutes=1), end - datetime.timedelta(hours=1)
        )
        if end <= start:
            end = start + datetime.timedelta(minutes=1)
        window = promql.Window(start=start, end=end, label="job")
        context["dashboard"] = dashboards.pod_dashboard(
            cluster=job.cluster, namespace=job.team.slug, pod_names=job.pods, window=window
        )
    return fragment(request, "gpujobs/_job_gpus.html", context)


@require_POST
@login_required
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    job = _visible_job(request, pk)
    try:
        services.job_cancel(actor=request.user, job=job)
    except InvalidTransition as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Stopping job #{job.pk}: its pods are being removed.")
    return redirect("gpujob-detail", pk=job.pk)
