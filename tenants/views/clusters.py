"""A cluster's queueing page (admins): its quota mode, its Kueue state, each team's policy."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from clusters.models import Cluster
from tenants import queueing, selectors
from tenants.forms import QuotaModeForm, add_service_errors
from tenants.models import ClusterState, TeamCluster, TeamQueuePolicy
from tenants.permissions import is_portal_admin


@login_required
def cluster_queueing(request: HttpRequest, name: str) -> HttpResponse:
    """Admins: how the cluster enforces quota (switch it here), whether its cluster-wide Kueue
    objects are in line, and each team's queue policy and state there."""
    if not is_portal_admin(request.user):
        raise PermissionDenied("Only portal admins can change how a cluster enforces quota.")
    cluster = get_object_or_404(Cluster, name=name)
    if request.method == "POST":
        form = QuotaModeForm(request.POST)
        if form.is_valid():
            try:
                cluster = queueing.cluster_set_quota_mode(
                    actor=request.user, cluster=cluster, quota_mode=form.cleaned_data["quota_mode"]
                )
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                messages.success(
                    request,
                    f"{cluster.name} now enforces quota with {cluster.get_quota_mode_display()}; "
                    "every team on it is being moved.",
                )
                return redirect("cluster-queueing", name=cluster.name)
    else:
        form = QuotaModeForm(initial={"quota_mode": cluster.quota_mode})
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
            "form": form,
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
