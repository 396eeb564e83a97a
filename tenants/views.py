"""The portal's pages. Thin: selectors decide what a user may see, services make every change,
forms parse input and carry the services' errors back to the fields they name."""

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusters.models import Cluster, QuotaMode
from portal.params import page_of
from tenants import queueing, selectors, services
from tenants.errors import InvalidTransition
from tenants.filtersets import AuditEventFilter, QuotaRequestFilter
from tenants.forms import (
    ApproveForm,
    QueuePolicyForm,
    QuotaModeForm,
    QuotaRequestForm,
    RejectForm,
    RevokeForm,
    ShrinkForm,
    add_service_errors,
)
from tenants.models import (
    AuditEvent,
    ClusterState,
    Membership,
    QuotaGrant,
    QuotaRequest,
    Team,
    TeamCluster,
    TeamQueuePolicy,
)
from tenants.permissions import can_request_quota, is_portal_admin, team_role

AUDIT_PAGE_SIZE = 25
PAST_REQUESTS_SHOWN = 50


# --- home --------------------------------------------------------------------------------------


@login_required
def home(request: HttpRequest) -> HttpResponse:
    teams = list(selectors.teams_visible_to(request.user).order_by("name", "slug"))
    roles = dict(Membership.objects.filter(user=request.user).values_list("team_id", "role"))
    grants_by_team: dict[int, list[dict]] = {}
    for row in (
        QuotaGrant.objects.filter(team__in=[t.pk for t in teams], state=QuotaGrant.State.ACTIVE)
        .values("team_id", "cluster__name", "gpu_resource")
        .annotate(gpus=Sum("gpus"), grants=Count("id"))
        .order_by("cluster__name", "gpu_resource")
    ):
        grants_by_team.setdefault(row["team_id"], []).append(row)
    pending_by_team = dict(
        QuotaRequest.objects.filter(
            team__in=[t.pk for t in teams], state=QuotaRequest.State.PENDING
        )
        .values("team_id")
        .annotate(n=Count("id"))
        .values_list("team_id", "n")
    )
    rows = [
        {
            "team": team,
            "role": Membership.Role(roles[team.pk]).label if team.pk in roles else None,
            "grants": grants_by_team.get(team.pk, []),
            "pending": pending_by_team.get(team.pk, 0),
        }
        for team in teams
    ]
    context: dict[str, Any] = {"rows": rows}
    if is_portal_admin(request.user):
        context["review_count"] = selectors.review_queue().count()
    return render(request, "tenants/home.html", context)


# --- teams and quota requests ------------------------------------------------------------------


def _visible_team(request: HttpRequest, slug: str):
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
    return _render_team(request, _visible_team(request, slug))


def _render_team(
    request: HttpRequest,
    team: Team,
    *,
    bound_policy: tuple[int, QueuePolicyForm] | None = None,
) -> HttpResponse:
    role = team_role(request.user, team)
    grants = list(
        selectors.quota_grants_visible_to(request.user)
        .filter(team=team)
        .order_by("cluster__name", "gpu_resource", "-created_at")
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
    team = _visible_team(request, slug)
    target = get_object_or_404(Cluster, name=cluster)
    if not is_portal_admin(request.user):
        raise PermissionDenied("Only portal admins can set a team's queue policy.")
    form = QueuePolicyForm(request.POST, prefix=f"policy-{target.pk}")
    if form.is_valid():
        try:
            queueing.team_queue_policy_set(actor=request.user, team=team, cluster=target,
                                           **form.cleaned_data)  # fmt: skip
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Saved {team.slug}'s queue policy on {target.name}.")
            return redirect(reverse("team-detail", args=[team.slug]) + "#queues")
    return _render_team(request, team, bound_policy=(target.pk, form))


@require_POST
@login_required
def team_archive(request: HttpRequest, slug: str) -> HttpResponse:
    team = _visible_team(request, slug)
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
    team = _visible_team(request, slug)
    target = get_object_or_404(Cluster, name=cluster)
    try:
        services.team_namespace_delete(actor=request.user, team=team, cluster=target,
                                       confirm=request.POST.get("confirm", "").strip())  # fmt: skip
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, message)
    else:
        messages.success(
            request, f"Deleting namespace {team.namespace} and everything in it on {target.name}."
        )
    return redirect("team-detail", slug=team.slug)


@login_required
def quota_request_new(request: HttpRequest, slug: str) -> HttpResponse:
    team = _visible_team(request, slug)
    if not can_request_quota(request.user, team):
        raise PermissionDenied(f"Only leads of {team.slug} can request quota for it.")

    if request.method == "GET" and request.htmx and "cluster" in request.GET:
        # The cluster select changed: send back the GPU kind select for that cluster.
        cluster_id = request.GET["cluster"]
        cluster = Cluster.objects.filter(pk=cluster_id).first() if cluster_id.isdigit() else None
        form = QuotaRequestForm(cluster=cluster)
        return render(
            request,
            "tenants/_gpu_kind_field.html",
            {"field": form["gpu_resource"], "model_field": form["gpu_model"]},
        )

    if request.method == "POST":
        form = QuotaRequestForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                quota_request = services.quota_request_create(
                    requested_by=request.user,
                    team=team,
                    cluster=data["cluster"],
                    gpu_resource=data["gpu_resource"],
                    gpu_model=data["gpu_model"],
                    gpus=data["gpus"],
                    cpu_cores=data["cpu_cores"],
                    memory_gib=data["memory_gib"],
                    starts_on=data["starts_on"],
                    ends_on=data["ends_on"],
                    justification=data["justification"],
                )
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                what = quota_request.gpu_model or quota_request.gpu_resource
                messages.success(
                    request,
                    f"Requested {quota_request.gpus} × {what} on {quota_request.cluster}. An "
                    "admin will review it.",
                )
                return redirect("team-detail", slug=team.slug)
    else:
        form = QuotaRequestForm()
    form.fields["cluster"].widget.attrs.update(
        {
            "hx-get": reverse("quota-request-new", args=[team.slug]),
            "hx-target": "#field-gpu_resource",
            "hx-swap": "outerHTML",
        }
    )
    return render(request, "tenants/quota_request_form.html", {"team": team, "form": form})


@require_POST
@login_required
def quota_request_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    quota_request = get_object_or_404(selectors.quota_requests_visible_to(request.user), pk=pk)
    try:
        services.quota_request_cancel(actor=request.user, quota_request=quota_request)
    except InvalidTransition as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Cancelled quota request #{quota_request.pk}.")
    return redirect("team-detail", slug=quota_request.team.slug)


# --- the review queue --------------------------------------------------------------------------


@dataclass
class ReviewRow:
    request: QuotaRequest
    summary: selectors.CapacitySummary | None
    approve_form: ApproveForm
    reject_form: RejectForm
    own: bool
    models: list[selectors.ModelCapacitySummary]

    @property
    def free_after(self) -> int | None:
        if self.summary is None:
            return None
        return self.summary.free_after(
            gpus=self.request.gpus, granted_in_period=self.request.granted_in_period
        )

    @property
    def model_summary(self) -> selectors.ModelCapacitySummary | None:
        """The requested model's figures (None for a request of any model)."""
        return next((m for m in self.models if m.gpu_model == self.request.gpu_model), None)

    @property
    def model_free_after(self) -> int | None:
        if not self.request.gpu_model:
            return None
        summary = self.model_summary
        plannable = summary.plannable if summary else 0
        return plannable - self.request.model_granted_in_period - self.request.gpus


def _require_admin(request: HttpRequest) -> None:
    if not is_portal_admin(request.user):
        raise PermissionDenied("Only portal admins can review quota requests.")


def _render_review(
    request: HttpRequest,
    *,
    bound_id: int | None = None,
    approve_form: ApproveForm | None = None,
    reject_form: RejectForm | None = None,
) -> HttpResponse:
    """The queue, oldest first (filtered as the API's review queue is), each request beside its
    cluster's capacity for that GPU kind; a form that failed is shown again, bound, with its
    errors."""
    filterset = QuotaRequestFilter(
        request.GET,
        queryset=selectors.review_queue(),
        request=request,
        teams=selectors.teams_visible_to(request.user).order_by("name", "slug"),
    )
    summaries = selectors.capacity_summaries()
    model_summaries = selectors.model_capacity_summaries()
    rows = []
    for quota_request in filterset.page_rows():
        mine = quota_request.pk == bound_id
        kind = (quota_request.cluster_id, quota_request.gpu_resource)
        rows.append(
            ReviewRow(
                request=quota_request,
                summary=summaries.get(kind),
                models=model_summaries.get(kind, []),
                approve_form=(approve_form if mine and approve_form else None)
                or ApproveForm(prefix=f"approve-{quota_request.pk}"),
                reject_form=(reject_form if mine and reject_form else None)
                or RejectForm(prefix=f"reject-{quota_request.pk}"),
                own=quota_request.requested_by_id == request.user.pk,
            )
        )
    return render(
        request,
        "tenants/review_queue.html",
        {"rows": rows, "bound_id": bound_id, "filter_form": filterset.form},
    )


@login_required
def review_queue(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    return _render_review(request)


def _visible_request(request: HttpRequest, pk: int) -> QuotaRequest:
    return get_object_or_404(selectors.quota_requests_visible_to(request.user), pk=pk)


@require_POST
@login_required
def quota_request_approve(request: HttpRequest, pk: int) -> HttpResponse:
    quota_request = _visible_request(request, pk)
    form = ApproveForm(request.POST, prefix=f"approve-{pk}")
    if form.is_valid():
        try:
            grant = services.quota_request_approve(
                reviewer=request.user,
                quota_request=quota_request,
                gpus=form.cleaned_data["gpus"],
                ends_on=form.cleaned_data["ends_on"],
                note=form.cleaned_data["note"],
            )
        except ValidationError as error:
            add_service_errors(form, error)
        except InvalidTransition as error:
            messages.error(request, str(error))
            return redirect("review-queue")
        else:
            messages.success(
                request,
                f"Approved request #{quota_request.pk}: {quota_request.team} has "
                f"{grant.gpus} × {grant.gpu_resource} on {grant.cluster}.",
            )
            return redirect("review-queue")
    _require_admin(request)
    return _render_review(request, bound_id=pk, approve_form=form)


@require_POST
@login_required
def quota_request_reject(request: HttpRequest, pk: int) -> HttpResponse:
    quota_request = _visible_request(request, pk)
    form = RejectForm(request.POST, prefix=f"reject-{pk}")
    if form.is_valid():
        try:
            services.quota_request_reject(
                reviewer=request.user, quota_request=quota_request, note=form.cleaned_data["note"]
            )
        except ValidationError as error:
            add_service_errors(form, error)
        except InvalidTransition as error:
            messages.error(request, str(error))
            return redirect("review-queue")
        else:
            messages.success(request, f"Rejected request #{quota_request.pk}.")
            return redirect("review-queue")
    _require_admin(request)
    return _render_review(request, bound_id=pk, reject_form=form)


# --- a cluster's queueing ----------------------------------------------------------------------


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


# --- grants ------------------------------------------------------------------------------------


def _render_grant(
    request: HttpRequest,
    grant: QuotaGrant,
    *,
    revoke_form: RevokeForm | None = None,
    shrink_form: ShrinkForm | None = None,
) -> HttpResponse:
    history = list(
        selectors.audit_events_visible_to(request.user)
        .filter(
            Q(target_type="QuotaGrant", target_id=grant.pk)
            | Q(target_type="QuotaRequest", target_id=grant.request_id)
        )
        .order_by("created_at", "id")
    )
    _describe_events(history)
    return render(
        request,
        "tenants/grant_detail.html",
        {
            "grant": grant,
            "history": history,
            "can_act": is_portal_admin(request.user) and grant.state == QuotaGrant.State.ACTIVE,
            "revoke_form": revoke_form or RevokeForm(prefix="revoke"),
            "shrink_form": shrink_form or ShrinkForm(prefix="shrink"),
        },
    )


def _visible_grant(request: HttpRequest, pk: int) -> QuotaGrant:
    return get_object_or_404(selectors.quota_grants_visible_to(request.user), pk=pk)


@login_required
def grant_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _render_grant(request, _visible_grant(request, pk))


@require_POST
@login_required
def grant_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    grant = _visible_grant(request, pk)
    form = RevokeForm(request.POST, prefix="revoke")
    if form.is_valid():
        try:
            services.quota_grant_revoke(
                actor=request.user, grant=grant, note=form.cleaned_data["note"]
            )
        except InvalidTransition as error:
            messages.error(request, str(error))
        except ValidationError as error:
            add_service_errors(form, error)
            return _render_grant(request, grant, revoke_form=form)
        else:
            messages.success(request, f"Revoked grant #{grant.pk}.")
        return redirect("grant-detail", pk=grant.pk)
    return _render_grant(request, grant, revoke_form=form)


@require_POST
@login_required
def grant_shrink(request: HttpRequest, pk: int) -> HttpResponse:
    grant = _visible_grant(request, pk)
    form = ShrinkForm(request.POST, prefix="shrink")
    if form.is_valid():
        try:
            shrunk = services.quota_grant_shrink(
                actor=request.user,
                grant=grant,
                gpus=form.cleaned_data["gpus"],
                ends_on=form.cleaned_data["ends_on"],
                note=form.cleaned_data["note"],
            )
        except InvalidTransition as error:
            messages.error(request, str(error))
        except ValidationError as error:
            add_service_errors(form, error)
            return _render_grant(request, grant, shrink_form=form)
        else:
            until = shrunk.ends_on.isoformat() if shrunk.ends_on else "open-ended"
            messages.success(
                request, f"Grant #{grant.pk} is now {shrunk.gpus} × {shrunk.gpu_resource}, {until}."
            )
        return redirect("grant-detail", pk=grant.pk)
    return _render_grant(request, grant, shrink_form=form)


# --- audit -------------------------------------------------------------------------------------

FIELD_LABELS = {
    "team_id": "team",
    "cluster_id": "cluster",
    "user_id": "user",
    "gpu_resource": "GPU kind",
    "gpus": "GPUs",
    "cpu_cores": "CPU cores",
    "memory_gib": "memory (GiB)",
    "starts_on": "start",
    "ends_on": "end",
    "decision_note": "decision note",
    "archived_at": "archived",
    "overcommit_ratio": "overcommit ratio",
    "resource_name": "GPU kind",
    "gpu_model": "GPU model",
    "admin_cap": "admin cap",
}


@dataclass(frozen=True)
class Change:
    field: str
    before: str | None
    after: str | None


def _describe_events(events: list[AuditEvent]) -> None:
    """Give each event ``changes``: readable field names and values, ids resolved to names;
    for an update only the fields that changed, for a create or delete every field."""
    ids: dict[str, set] = {"team_id": set(), "cluster_id": set(), "user_id": set()}
    for event in events:
        for snapshot in (event.before or {}, event.after or {}):
            for key, seen in ids.items():
                if snapshot.get(key) is not None:
                    seen.add(snapshot[key])
    names: dict[str, dict[Any, str]] = {
        "team_id": {e.team_id: e.team.slug for e in events if e.team_id is not None},
        "cluster_id": {},
        "user_id": {},
    }
    if ids["team_id"] - names["team_id"].keys():
        names["team_id"].update(
            Team.objects.filter(pk__in=ids["team_id"]).values_list("pk", "slug")
        )
    if ids["cluster_id"]:
        names["cluster_id"] = dict(
            Cluster.objects.filter(pk__in=ids["cluster_id"]).values_list("pk", "name")
        )
    if ids["user_id"]:
        names["user_id"] = dict(
            User.objects.filter(pk__in=ids["user_id"]).values_list("pk", "username")
        )

    def show(key: str, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if key in names:
            return names[key].get(value) or f"#{value}"
        return str(value)

    for event in events:
        before, after = event.before or {}, event.after or {}
        changes = []
        is_update = event.before is not None and event.after is not None
        for key in dict.fromkeys([*before, *after]):
            if is_update and before.get(key) == after.get(key):
                continue
            if not is_update and before.get(key) in (None, "") and after.get(key) in (None, ""):
                continue  # a created or deleted row: its empty fields say nothing
            changes.append(
                Change(
                    field=FIELD_LABELS.get(key, key.replace("_", " ")),
                    before=show(key, before.get(key)),
                    after=show(key, after.get(key)),
                )
            )
        event.changes = changes


def _target_url(event: AuditEvent) -> str | None:
    if event.target_type == "QuotaGrant":
        return reverse("grant-detail", args=[event.target_id])
    if event.target_type == "QuotaRequest" and event.team is not None:
        return reverse("team-detail", args=[event.team.slug]) + f"#request-{event.target_id}"
    if event.target_type == "Team" and event.team is not None:
        return reverse("team-detail", args=[event.team.slug])
    return None


@login_required
def audit_list(request: HttpRequest) -> HttpResponse:
    filterset = AuditEventFilter(
        request.GET,
        queryset=selectors.audit_events_visible_to(request.user).order_by("-created_at", "-id"),
        request=request,
        teams=selectors.teams_visible_to(request.user).order_by("name", "slug"),
    )
    page = page_of(request, filterset.page_rows(), AUDIT_PAGE_SIZE)
    page_events = list(page.object_list)
    _describe_events(page_events)
    for event in page_events:
        event.target_url = _target_url(event)
    return render(
        request,
        "tenants/audit_list.html",
        {"filter_form": filterset.form, "page": page, "events": page_events},
    )
