"""A cluster's queueing page (admins): its quota mode, its allowed registries, its Kueue state,
each team's policy."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from clusters.models import Cluster
from tenants import cluster_settings, queueing, selectors
from tenants.forms import ClusterRegistriesForm, QuotaModeForm, add_service_errors
from tenants.models import ClusterState, TeamCluster, TeamQueuePolicy
from tenants.permissions import is_portal_admin

# The registries form says which it is (a hidden field); any other post is the quota mode's.
REGISTRIES_FORM = "registries"


@login_required
def cluster_queueing(request: HttpRequest, name: str) -> HttpResponse:
    """Admins: how the cluster enforces quota (switch it here), which registries its team
    namespaces pull from (set them here), whether its cluster-wide Kueue objects are in line,
    and each team's queue policy and state there."""
    if not is_portal_admin(request.user):
        raise PermissionDenied("Only portal admins can change how a cluster enforces quota.")
    cluster = get_object_or_404(Cluster, name=name)
    if request.method != "POST":
        return _render(request, cluster)
    if request.POST.get("form") == REGISTRIES_FORM:
        return _set_registries(request, cluster)
    form = QuotaModeForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                cluster = queueing.cluster_set_quota_mode(
                    actor=request.user, cluster=cluster, quota_mode=data["quota_mode"]
                )
                cluster = queueing.cluster_set_borrowing(
                    actor=request.user,
                    cluster=cluster,
                    **{field: data[field] for field in queueing.BORROWING_FIELDS},
                )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            sharing = "by weight" if cluster.borrowers_share_by_weight else "first come"
            messages.success(
                request,
                f"{cluster.name} now enforces quota with {cluster.get_quota_mode_display()}, "
                f"borrowers sharing idle GPUs {sharing}; every team on it is being moved.",
            )
            return redirect("cluster-queueing", name=cluster.name)
    return _render(request, cluster, form=form)


def _set_registries(request: HttpRequest, cluster: Cluster) -> HttpResponse:
    """The registries the cluster's team namespaces may pull from; errors beside the fields."""
    registries_form = ClusterRegistriesForm(request.POST)
    if registries_form.is_valid():
        try:
            cluster = cluster_settings.cluster_set_registries(
                actor=request.user, cluster=cluster, **registries_form.cleaned_data
            )
        except ValidationError as error:
            add_service_errors(registries_form, error)
        else:
            allowed = (
                "any registry"
                if cluster.allow_all_registries
                else ", ".join(cluster.allowed_registries) or "no registry"
            )
            messages.success(
                request,
                f"{cluster.name} now allows images from {allowed}; its admission policies are "
                "being updated.",
            )
            return redirect(reverse("cluster-queueing", args=[cluster.name]) + "#registries")
    return _render(request, cluster, registries_form=registries_form)


def _render(
    request: HttpRequest,
    cluster: Cluster,
    *,
    form: QuotaModeForm | None = None,
    registries_form: ClusterRegistriesForm | None = None,
) -> HttpResponse:
    team_states = (
        TeamCluster.objects.filter(cluster=cluster, namespace_deleted_at__isnull=True)
        .select_related("team")
        .order_by("team__slug")
    )
    policies = {p.team_id: p for p in TeamQueuePolicy.objects.filter(cluster=cluster)}
    return render(
        request,
        "tenants/cluster_queueing.html",
        {
            "cluster": cluster,
            "form": form
            or QuotaModeForm(
                initial={
                    "quota_mode": cluster.quota_mode,
                    **{field: getattr(cluster, field) for field in queueing.BORROWING_FIELDS},
                }
            ),
            "registries_form": registries_form or ClusterRegistriesForm.for_cluster(cluster),
            "state": ClusterState.objects.filter(cluster=cluster).first(),
            "teams": [(state, policies.get(state.team_id)) for state in team_states],
            "models": [
                m
                for (cluster_id, _), models in selectors.model_capacity_summaries().items()
                if cluster_id == cluster.pk
                for m in models
            ],
        },
    )
