"""The team page and the actions taken on it: queue policy, archive, namespace deletion."""

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusters.models import Cluster, QuotaMode
from tenants import queueing, selectors, services
from tenants.errors import InvalidTransition
from tenants.forms import QueuePolicyForm, add_service_errors
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team, TeamCluster, TeamQueuePolicy
from tenants.permissions import can_request_quota, is_portal_admin, team_role

PAST_REQUESTS_SHOWN = 50
ENDED_GRANTS_SHOWN = 50


def visible_team(request: HttpRequest, slug: str):
    """The team, or 404 when the user may not see it (never a 403 that confirms it exists)."""
    return get_object_or_404(selectors.teams_visible_to(request.user), slug=slug)


@dataclass
class QueueRow:
    """The team's queueing on one cluster it is on: the cluster's mode, the team's policy there
    (None: the defaults) and, for admins, the form that sets it."""

    cluster: Cluster
    policy: TeamQueuePolicy | None
    form: QueuePolicyForm | None

    @property
    def kueue(self) -> bool:
        return self.cluster.quota_mode == QuotaMode.KUEUE


def _queue_rows(
    request: HttpRequest, team: Team, states, *, bound: tuple[int, QueuePolicyForm] | None = None
) -> list[QueueRow]:
    policies = {
        p.cluster_id: p for p in selectors.queue_policies_visible_to(request.user).filter(team=team)
    }
    admin = is_portal_admin(request.user) and team.archived_at is None
    rows = []
    for state in states:
        policy = policies.get(state.cluster_id)
        form = None
        if admin:
            if bound and bound[0] == state.cluster_id:
                form = bound[1]
            else:
                initial = {"fair_sharing_weight": 1}
                if policy is not None:
                    initial = {
                        "borrowing_limit": policy.borrowing_limit,
                        "lending_limit": policy.lending_limit,
                        "fair_sharing_weight": policy.fair_sharing_weight.normalize(),
                    }
                form = QueuePolicyForm(prefix=f"policy-{state.cluster_id}", initial=initial)
        rows.append(QueueRow(cluster=state.cluster, policy=policy, form=form))
    return rows


@login_required
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    return _render_team(request, visible_team(request, slug))


def _render_team(
    request: HttpRequest,
    team: Team,
    *,
    bound_policy: tuple[int, QueuePolicyForm] | None = None,
) -> HttpResponse:
    role = team_role(request.user, team)
    team_grants = selectors.quota_grants_visible_to(request.user).filter(team=team)
    # Ended grants only accumulate: the newest, as with past requests, in the same query.
    newest_ended = (
        team_grants.exclude(state=QuotaGrant.State.ACTIVE)
        .order_by("-created_at", "-id")
        .values("pk")[:ENDED_GRANTS_SHOWN]
    )
    grants = list(
        team_grants.filter(Q(state=QuotaGrant.State.ACTIVE) | Q(pk__in=newest_ended)).order_by(
            "cluster__name", "gpu_resource", "-created_at"
        )
    )
    requests_ = selectors.quota_requests_visible_to(request.user).filter(team=team)
    pending = list(requests_.filter(state=QuotaRequest.State.PENDING).order_by("created_at", "id"))
    for quota_request in pending:
        quota_request.can_cancel = (
            quota_request.requested_by_id == request.user.pk or role == Membership.Role.LEAD
        )
    past = list(
        requests_.exclude(state=QuotaRequest.State.PENDING)
        .select_related("grant")
        .order_by("-decided_at", "-created_at", "-id")[:PAST_REQUESTS_SHOWN]
    )
    states = list(
        TeamCluster.objects.filter(team=team).select_related("cluster").order_by("cluster__name")
    )
    return render(
        request,
        "tenants/team_detail.html",
        {
            "team": team,
            "role": Membership.Role(role).label if role else None,
            "active_grants": [g for g in grants if g.state == QuotaGrant.State.ACTIVE],
            "ended_grants": [g for g in grants if g.state != QuotaGrant.State.ACTIVE],
            "pending_requests": pending,
            "past_requests": past,
            "can_request": can_request_quota(request.user, team),
            "is_admin": is_portal_admin(request.user),
            "cluster_states": states,
            "queue_rows": _queue_rows(request, team, states, bound=bound_policy),
        },
    )


@require_POST
@login_required
def team_queue_policy(request: HttpRequest, slug: str, cluster: str) -> HttpResponse:
    team = visible_team(request, slug)
    target = get_object_or_404(Cluster, name=cluster)
    if not is_portal_admin(request.user):
        raise PermissionDenied("Only portal admins can set a team's queue policy.")
    form = QueuePolicyForm(request.POST, prefix=f"policy-{target.pk}")
    if form.is_valid():
        try:
            queueing.team_queue_policy_set(
                actor=request.user, team=team, cluster=target, **form.cleaned_data
            )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Saved {team.slug}'s queue policy on {target.name}.")
            return redirect(reverse("team-detail", args=[team.slug]) + "#queues")
    return _render_team(request, team, bound_policy=(target.pk, form))


@require_POST
@login_required
def team_archive(request: HttpRequest, slug: str) -> HttpResponse:
    team = visible_team(request, slug)
    try:
        services.team_archive(actor=request.user, team=team, note=request.POST.get("note", ""))
    except InvalidTransition as error:
        messages.error(request, str(error))
    else:
        messages.success(
            request,
            f"Archived team {team.slug}: its grants are revoked, and its bindings and quota are "
            "being removed from every cluster. Its namespaces stay until you delete them.",
        )
    return redirect("team-detail", slug=team.slug)


@require_POST
@login_required
def team_namespace_delete(request: HttpRequest, slug: str, cluster: str) -> HttpResponse:
    team = visible_team(request, slug)
    target = get_object_or_404(Cluster, name=cluster)
    try:
        services.team_namespace_delete(
            actor=request.user,
            team=team,
            cluster=target,
            confirm=request.POST.get("confirm", "").strip(),
        )
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, message)
    else:
        messages.success(
            request, f"Deleting namespace {team.namespace} and everything in it on {target.name}."
        )
    return redirect("team-detail", slug=team.slug)
