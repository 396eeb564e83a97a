"""Changes to teams, memberships, users and cluster settings, and offboarding a team (quota
requests and grants are ``tenants.quota``). Views, serializers and tasks call these and nothing
else.

Each public function validates first (``quota_checks``: raising ``ValidationError`` with the field
and the reason, ``PermissionDenied`` or ``InvalidTransition``) and only then writes, inside one
transaction, with an audit event per state change (``audit``). Whenever what a team holds on a
cluster changes, ``reconcile_triggers.request_reconcile_after_commit`` brings the cluster in line
after commit.
"""

from decimal import Decimal

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from tenants.audit import audit, save_audited, snapshot
from tenants.errors import InvalidTransition, refuse_taken_slug
from tenants.identities import identity_refusal
from tenants.models import AuditEvent, Membership, QuotaGrant, QuotaRequest, Team, TeamCluster
from tenants.permissions import is_portal_admin
from tenants.quota import end_grant, lock_cluster
from tenants.reconcile_triggers import (
    request_cluster_reconcile_after_commit,
    request_reconcile_after_commit,
    request_reconcile_of_cluster_settings,
    request_reconcile_on_team_clusters,
)
from tenants.selectors import user_team_ids
from tenants.signals import user_lost_access

Action = AuditEvent.Action
RequestState = QuotaRequest.State
GrantState = QuotaGrant.State


# --- teams and memberships ---------------------------------------------------------------------


def team_create(*, actor: User, slug: str, name: str, description: str = "") -> Team:
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can create teams.")
    team = Team(slug=slug, name=name, description=description)
    with refuse_taken_slug("team", slug), transaction.atomic():
        save_audited(actor=actor, instance=team, action=Action.TEAM_CREATED, team=team, before=None)
    return team


def check_team_slug_change(team: Team, slug: str) -> None:
    """A team's slug is its namespace's name: once the team has a namespace on any cluster
    (or one is on its way: a state row exists), renaming it would strand that namespace and
    everything in it, so it is refused."""
    if slug == team.slug:
        return
    if TeamCluster.objects.filter(team=team).exists():
        raise ValidationError(
            {
                "slug": f"Team {team.slug} has a namespace named {team.slug} on a cluster, so "
                "its slug cannot change. Create a new team instead."
            }
        )


def team_update(
    *,
    actor: User,
    team: Team,
    name: str | None = None,
    description: str | None = None,
    slug: str | None = None,
    external_services_allowed: bool | None = None,
) -> Team:
    """Change a team's name, description, whether it may expose Services outside the
    clusters (its namespaces are brought in line) or (while it has no namespace anywhere)
    slug."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change teams.")
    with refuse_taken_slug("team", slug), transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        before = snapshot(locked)
        if slug is not None:
            check_team_slug_change(locked, slug)
            locked.slug = slug
        if name is not None:
            locked.name = name
        if description is not None:
            locked.description = description
        if external_services_allowed is not None:
            locked.external_services_allowed = external_services_allowed
        saved = save_audited(
            actor=actor, instance=locked, action=Action.TEAM_UPDATED, team=locked, before=before
        )
        if saved and locked.external_services_allowed != before["external_services_allowed"]:
            request_reconcile_on_team_clusters(team=locked)  # the namespaces' label
    return locked


def check_cluster_identity(user: User, *, field: str = "user") -> None:
    """The user's username must be able to name them on a cluster (``tenants.identities``)."""
    refusal = identity_refusal(user.get_username())
    if refusal:
        raise ValidationError({field: f"{refusal} This user cannot be given access to a cluster."})


def user_access_changed(*, actor: User | None, user: User, before: dict) -> None:
    """A user was deactivated, reactivated or renamed (``before``: their ``snapshot`` from
    before): record it, and bring every namespace of their teams in line, so a deactivated
    user is dropped from every binding and a renamed one is bound under the new name only.
    Runs inside the transaction of the change."""
    after = snapshot(user)
    if after == before:
        return
    if after["is_active"] != before["is_active"]:
        action = Action.USER_REACTIVATED if user.is_active else Action.USER_DEACTIVATED
    else:
        action = Action.USER_RENAMED
    audit(actor=actor, action=action, target=user, team=None, before=before, after=after)
    if not user.is_active and before["is_active"]:
        user_lost_access.send(sender=User, user=user, why="deactivated")
    for team in Team.objects.filter(pk__in=user_team_ids(user=user)).order_by("pk"):
        request_reconcile_on_team_clusters(team=team)


def user_delete(*, actor: User, user: User) -> None:
    """Delete a user (their memberships go with them) and bring their teams' namespaces in
    line, so they are dropped from every binding."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can delete users.")
    with transaction.atomic():
        teams = list(Team.objects.filter(pk__in=user_team_ids(user=user)).order_by("pk"))
        user.delete()
        for team in teams:
            request_reconcile_on_team_clusters(team=team)


def membership_set(*, actor: User, team: Team, user: User, role: str) -> Membership:
    """Add the user to the team with the role, or change their role."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change team memberships.")
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Must be one of: {', '.join(Membership.Role.values)}."})
    check_cluster_identity(user, field="username")
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
        before = snapshot(membership) if membership else None
        if membership is None:
            membership = Membership.objects.create(team=team, user=user, role=role)
        elif membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
        else:
            return membership
        audit(
            actor=actor,
            action=Action.MEMBERSHIP_SET,
            target=membership,
            team=team,
            before=before,
            after=snapshot(membership),
        )
        request_reconcile_on_team_clusters(team=team)  # the team's RoleBindings change
    return membership


def membership_remove(*, actor: User, team: Team, user: User) -> None:
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change team memberships.")
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
        if membership is None:
            raise ValidationError({"user": f"{user.username} is not a member of {team.slug}."})
        before = snapshot(membership)
        audit(
            actor=actor,
            action=Action.MEMBERSHIP_REMOVED,
            target=membership,
            team=team,
            before=before,
            after=None,
        )
        membership.delete()
        request_reconcile_on_team_clusters(team=team)  # the team's RoleBindings change


# --- offboarding -------------------------------------------------------------------------------


def team_archive(*, actor: User, team: Team, note: str = "") -> Team:
    """Offboard a team: cancel its pending requests, revoke its active grants and archive it.

    On every cluster it is on, the next reconcile removes its RoleBindings and drops its quota
    to zero. Its namespaces stay (with whatever runs there) until an admin deletes them with
    ``team_namespace_delete``.
    """
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can archive teams.")
    note = note.strip() or "Team archived."
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        if locked.archived_at is not None:
            raise InvalidTransition(
                f"Team {locked.slug} is already archived.", current_state="archived"
            )
        before = snapshot(locked)
        pending = QuotaRequest.objects.select_for_update().filter(
            team=locked, state=RequestState.PENDING
        )
        for quota_request in pending.order_by("pk"):
            request_before = snapshot(quota_request)
            quota_request.state = RequestState.CANCELLED
            quota_request.decided_by = actor
            quota_request.decided_at = timezone.now()
            quota_request.decision_note = note
            quota_request.save(update_fields=["state", "decided_by", "decided_at", "decision_note"])
            audit(
                actor=actor,
                action=Action.QUOTA_REQUEST_CANCELLED,
                target=quota_request,
                team=locked,
                before=request_before,
                after=snapshot(quota_request),
                note=note,
            )
        active = QuotaGrant.objects.filter(team=locked, state=GrantState.ACTIVE)
        for grant_id in active.order_by("pk").values_list("pk", flat=True):
            end_grant(grant_id=grant_id, to_state=GrantState.REVOKED, actor=actor, note=note)
        locked.archived_at = timezone.now()
        locked.save(update_fields=["archived_at"])
        audit(
            actor=actor,
            action=Action.TEAM_ARCHIVED,
            target=locked,
            team=locked,
            before=before,
            after=snapshot(locked),
            note=note,
        )
        request_reconcile_on_team_clusters(team=locked)
    return locked


def team_namespace_delete(
    *, actor: User, team: Team, cluster: Cluster, confirm: str
) -> TeamCluster:
    """Delete an archived team's namespace on a cluster, and everything in it.

    Irreversible, so the admin must type the team's slug as ``confirm``. The reconcile does the
    deletion, and only of a namespace the portal created.
    """
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can delete a team's namespace.")
    if team.archived_at is None:
        raise ValidationError(
            {"team": f"Archive team {team.slug} first: its namespace is deleted only after that."}
        )
    if confirm != team.slug:
        raise ValidationError(
            {"confirm": f"Type the team's slug, {team.slug}, to confirm deleting its namespace."}
        )
    with transaction.atomic():
        state = TeamCluster.objects.select_for_update().filter(team=team, cluster=cluster).first()
        if state is None:
            raise ValidationError(
                {"cluster": f"Team {team.slug} has no namespace on cluster {cluster.name}."}
            )
        if state.namespace_delete_requested_at is None:
            state.namespace_delete_requested_at = timezone.now()
            state.save(update_fields=["namespace_delete_requested_at"])
            audit(
                actor=actor,
                action=Action.TEAM_NAMESPACE_DELETE_REQUESTED,
                target=team,
                team=team,
                before=None,
                after=None,
                note=f"Namespace {team.namespace} on cluster {cluster.name}.",
            )
        request_reconcile_after_commit(team_id=team.pk, cluster_id=cluster.pk)
    state.refresh_from_db()
    return state


# --- clusters ----------------------------------------------------------------------------------


def cluster_settings_changed(*, actor: User, cluster: Cluster, before: dict) -> None:
    """An admin changed a cluster's settings (``before``: its ``snapshot`` from before, in the
    Django admin): record it, and when what reaches the cluster changed (placement,
    registries, Pod Security level, user prefix), bring its admission policies and every team
    namespace there in line. Runs inside the transaction of the change."""
    after = snapshot(cluster)
    if after == before:
        return
    audit(
        actor=actor,
        action=Action.CLUSTER_SETTINGS_CHANGED,
        target=cluster,
        team=None,
        before=before,
        after=after,
    )
    request_reconcile_of_cluster_settings(cluster_id=cluster.pk)


def on_cluster_settings_changed(
    sender, *, cluster: Cluster, before: Cluster | None, actor, **kwargs
) -> None:
    """``clusters.signals.settings_changed``: a new cluster gets its admission policies; a
    changed one goes through ``cluster_settings_changed``."""
    if before is None:
        request_cluster_reconcile_after_commit(cluster_id=cluster.pk)
        return
    cluster_settings_changed(actor=actor, cluster=cluster, before=snapshot(before))


def cluster_set_overcommit(*, actor: User, cluster: Cluster, ratio: Decimal) -> Cluster:
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change a cluster's overcommit ratio.")
    if ratio <= 0 or ratio > 100:
        raise ValidationError({"overcommit_ratio": "Must be above 0 and at most 100."})
    with transaction.atomic():
        locked = lock_cluster(cluster.pk)
        before = snapshot(locked)
        locked.overcommit_ratio = ratio
        locked.save(update_fields=["overcommit_ratio"])
        audit(
            actor=actor,
            action=Action.CLUSTER_OVERCOMMIT_CHANGED,
            target=locked,
            team=None,
            before=before,
            after=snapshot(locked),
        )
    return locked
