"""Group sync: apply what a user's provider groups give (``tenants.group_mapping``) to their team
memberships and admin role, at each single sign-on and when a sign-in grows stale.

One transaction per user: the user's row is locked (two sign-ins of one person at once apply one
after the other), the memberships in the teams the mapping manages are added, changed or removed,
the admin role set, each change audited (``actor`` None: the provider decided, and the note says
which group), and every team whose members changed is reconciled on its clusters after commit,
so a removed member loses their RoleBindings. A mapping entry naming a team that does not exist
is skipped with an audit event and a log line saying so; the rest still applies.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from tenants.audit import audit, snapshot
from tenants.group_mapping import (
    GroupRule,
    SkippedRule,
    desired_access,
    managed_teams,
    membership_changes,
)
from tenants.models import AuditEvent, Membership, Team
from tenants.reconcile_triggers import request_reconcile_on_team_clusters
from tenants.services import check_cluster_identity
from tenants.signals import user_lost_access

logger = logging.getLogger(__name__)
Action = AuditEvent.Action


@dataclass(frozen=True)
class GroupSyncResult:
    """What one sync changed: team slug -> role after (None: removed), the admin role after
    (None: unchanged), and the rules it skipped."""

    memberships: dict[str, str | None]
    admin: bool | None
    skipped: tuple[SkippedRule, ...]


def user_groups_sync(
    *, user: User, groups: Iterable[str], rules: Mapping[str, GroupRule], why: str
) -> GroupSyncResult:
    """Set the user's memberships in the managed teams, and their admin role, from ``groups``
    (already checked: ``group_mapping.parse_groups_claim``). ``why`` starts each audit note
    ("Single sign-on", "Sign-in expired")."""
    groups = list(groups)
    check_cluster_identity(user, field="username")
    managed = managed_teams(rules)
    with transaction.atomic():
        locked = User.objects.select_for_update().get(pk=user.pk)
        teams = {
            team.slug: team
            for team in Team.objects.filter(slug__in=managed, archived_at__isnull=True)
        }
        desired = desired_access(groups=groups, rules=rules, existing_teams=teams)
        memberships = {
            m.team.slug: m
            for m in Membership.objects.select_for_update(of=["self"])
            .select_related("team")
            .filter(user=locked, team__slug__in=managed)
            .order_by("pk")
        }
        changes = membership_changes(
            current={slug: m.role for slug, m in memberships.items()},
            desired=desired.memberships,
            managed=teams,  # a managed team that does not exist has no membership to touch
        )
        changed: dict[str, str | None] = {}
        for slug, role in changes.add.items():
            membership = Membership.objects.create(team=teams[slug], user=locked, role=role)
            _audit_membership(membership, None, f"{why}: group {desired.sources[slug]!r}")
            changed[slug] = role
        for slug, (_, role) in changes.change.items():
            membership = memberships[slug]
            before = snapshot(membership)
            membership.role = role
            membership.save(update_fields=["role"])
            _audit_membership(membership, before, f"{why}: group {desired.sources[slug]!r}")
            changed[slug] = role
        for slug in changes.remove:
            membership = memberships[slug]
            _audit_membership(
                membership, snapshot(membership), f"{why}: in no group of {slug}", removed=True
            )
            membership.delete()
            changed[slug] = None
        for slug in sorted(changed):
            request_reconcile_on_team_clusters(team=teams[slug])  # its RoleBindings change
        if changes.remove and not Membership.objects.filter(user=locked).exists():
            user_lost_access.send(sender=User, user=locked, why=f"{why}: no membership left")
        admin = _set_admin(locked, desired.admin, why=why)
        for skipped in desired.skipped:
            logger.error("Group sync of %s skipped a mapping entry: %s", locked, skipped.reason)
            audit(
                actor=None,
                action=Action.GROUP_SYNC_ENTRY_SKIPPED,
                target=locked,
                team=None,
                before=None,
                after={"group": skipped.group, "team": skipped.team},
                note=f"{why}: {skipped.reason}; fix OIDC_GROUP_MAPPING or create the team.",
            )
    return GroupSyncResult(memberships=changed, admin=admin, skipped=desired.skipped)


def _audit_membership(
    membership: Membership, before: dict | None, note: str, *, removed: bool = False
) -> None:
    audit(
        actor=None,
        action=Action.MEMBERSHIP_REMOVED if removed else Action.MEMBERSHIP_SET,
        target=membership,
        team=membership.team,
        before=before,
        after=None if removed else snapshot(membership),
        note=note,
    )


def _set_admin(user: User, admin: bool | None, *, why: str) -> bool | None:
    """Portal admin (``is_staff``) as the groups say; revoking clears ``is_superuser`` too, the
    other flag that makes an admin. None: the mapping gives no admin role, nothing changes."""
    if admin is None:
        return None
    before = {"is_staff": user.is_staff, "is_superuser": user.is_superuser}
    after = {"is_staff": admin, "is_superuser": user.is_superuser and admin}
    if after == before:
        return None
    user.is_staff, user.is_superuser = after["is_staff"], after["is_superuser"]
    user.save(update_fields=["is_staff", "is_superuser"])
    audit(
        actor=None,
        action=Action.USER_ADMIN_GRANTED if admin else Action.USER_ADMIN_REVOKED,
        target=user,
        team=None,
        before=before,
        after=after,
        note=f"{why}: {'in' if admin else 'in no'} admin group",
    )
    return admin
