"""From an OpenID provider's groups to team memberships and the portal admin role. Pure.

The mapping (``OIDC_GROUP_MAPPING``) names provider groups; each gives a role in one team
(``{"team": "vision", "role": "lead"}``) or makes its members portal admins (``{"admin": true}``).
The teams it names are the provider's to decide: at each sign-in a user's membership in each of
them is set from their groups (the highest role any of their groups gives; none: no membership),
and memberships in every other team are left as admins set them. The admin role is decided by the
groups too when any entry gives it, and left alone when none does.

``parse_group_mapping`` checks the setting's shape (the system check and each sign-in run it);
``parse_groups_claim`` checks what the provider sent; ``desired_access`` and ``membership_changes``
compute what a sign-in changes. ``tenants.group_sync`` applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Roles from the most to the least access: a user in two groups of one team gets the first.
ROLE_ORDER = ("lead", "member", "viewer")
MAX_GROUPS = 1000
MAX_GROUP_NAME_LENGTH = 1000


class GroupMappingError(ValueError):
    """The mapping setting is malformed; the message names the entry."""


class MalformedGroupsClaim(ValueError):
    """The provider's groups claim is not a list of group names; the message says how."""


@dataclass(frozen=True)
class GroupRule:
    """What membership of one provider group gives: a role in a team, and/or portal admin."""

    group: str
    team: str | None = None
    role: str | None = None
    admin: bool = False


@dataclass(frozen=True)
class SkippedRule:
    """A rule of the mapping that a sign-in could not apply (its team is unknown)."""

    group: str
    team: str
    reason: str


@dataclass(frozen=True)
class DesiredAccess:
    """What a user's groups give them. ``memberships``: team slug -> role, for the teams the
    mapping manages that exist; ``admin``: True/False, or None when the mapping gives no admin
    role (then it is left alone); ``sources``: team slug -> the group that gave the role."""

    memberships: dict[str, str]
    admin: bool | None
    sources: dict[str, str] = field(default_factory=dict)
    skipped: tuple[SkippedRule, ...] = ()


@dataclass(frozen=True)
class MembershipChanges:
    """The writes that take a user's memberships in managed teams to the desired ones."""

    add: dict[str, str]  # team slug -> role
    change: dict[str, tuple[str, str]]  # team slug -> (role before, role after)
    remove: dict[str, str]  # team slug -> role before

    def __bool__(self) -> bool:
        return bool(self.add or self.change or self.remove)


def parse_group_mapping(raw: Any, *, roles: Iterable[str] = ROLE_ORDER) -> dict[str, GroupRule]:
    """The mapping as rules by group; ``GroupMappingError`` naming the first bad entry."""
    roles = tuple(roles)
    if not isinstance(raw, Mapping):
        raise GroupMappingError(
            "OIDC_GROUP_MAPPING must be a JSON object of group name -> "
            '{"team": ..., "role": ...} or {"admin": true}.'
        )
    rules = {}
    for group, entry in raw.items():
        where = f"OIDC_GROUP_MAPPING[{group!r}]"
        if not isinstance(group, str) or not group.strip():
            raise GroupMappingError(f"{where}: a group name must be a non-empty string.")
        if not isinstance(entry, Mapping):
            raise GroupMappingError(
                f'{where}: must be an object such as {{"team": "vision", "role": "lead"}} or '
                '{"admin": true}.'
            )
        unknown = sorted(set(entry) - {"team", "role", "admin"})
        if unknown:
            raise GroupMappingError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                "allowed: 'team', 'role', 'admin'."
            )
        admin = entry.get("admin", False)
        if not isinstance(admin, bool):
            raise GroupMappingError(f"{where}: 'admin' must be true or false.")
        team = entry.get("team")
        role = entry.get("role")
        if team is None and role is not None:
            raise GroupMappingError(f"{where}: 'role' needs a 'team'.")
        if team is not None:
            if not isinstance(team, str) or not team.strip():
                raise GroupMappingError(f"{where}: 'team' must be a team's slug.")
            if role is None:
                raise GroupMappingError(f"{where}: 'team' needs a 'role' ({', '.join(roles)}).")
            if role not in roles:
                raise GroupMappingError(f"{where}: role {role!r} is not one of {', '.join(roles)}.")
        if team is None and not admin:
            raise GroupMappingError(f"{where}: gives nothing; name a team and role, or admin.")
        rules[group] = GroupRule(group=group, team=team, role=role, admin=admin)
    return rules


def parse_groups_claim(value: Any) -> list[str]:
    """The group names the provider sent: a list of strings (absent: no groups)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedGroupsClaim(
            f"the groups claim is a {type(value).__name__}, not a list of group names"
        )
    if len(value) > MAX_GROUPS:
        raise MalformedGroupsClaim(f"the groups claim holds more than {MAX_GROUPS} groups")
    for item in value:
        if not isinstance(item, str) or not item or len(item) > MAX_GROUP_NAME_LENGTH:
            raise MalformedGroupsClaim(
                f"the groups claim holds {item!r}, which is not a group name"
            )
    return list(dict.fromkeys(value))


def desired_access(
    *,
    groups: Iterable[str],
    rules: Mapping[str, GroupRule],
    existing_teams: Iterable[str],
    roles: Iterable[str] = ROLE_ORDER,
) -> DesiredAccess:
    """What the groups give, over the teams that exist (``existing_teams``: active slugs).
    A rule naming a team that does not exist is skipped, and said so, for the user's groups."""
    order = {role: rank for rank, role in enumerate(roles)}
    existing = set(existing_teams)
    memberships: dict[str, str] = {}
    sources: dict[str, str] = {}
    skipped = []
    held = [rules[group] for group in groups if group in rules]
    for rule in held:
        if rule.team is None:
            continue
        if rule.team not in existing:
            skipped.append(
                SkippedRule(
                    group=rule.group,
                    team=rule.team,
                    reason=f"group {rule.group!r} maps to team {rule.team!r}, which does not "
                    "exist or is archived",
                )
            )
            continue
        current = memberships.get(rule.team)
        if current is None or order[rule.role] < order[current]:
            memberships[rule.team] = rule.role
            sources[rule.team] = rule.group
    gives_admin = any(rule.admin for rule in rules.values())
    admin = any(rule.admin for rule in held) if gives_admin else None
    return DesiredAccess(
        memberships=memberships, admin=admin, sources=sources, skipped=tuple(skipped)
    )


def managed_teams(rules: Mapping[str, GroupRule]) -> set[str]:
    """The teams whose memberships the provider's groups decide."""
    return {rule.team for rule in rules.values() if rule.team is not None}


def membership_changes(
    *, current: Mapping[str, str], desired: Mapping[str, str], managed: Iterable[str]
) -> MembershipChanges:
    """From the user's roles now (team slug -> role, any team) to the desired ones, touching
    only the managed teams. A managed team whose rule was skipped (unknown) has no membership
    to touch: it does not exist."""
    managed = set(managed)
    add, change, remove = {}, {}, {}
    for team in sorted(managed):
        before, after = current.get(team), desired.get(team)
        if before == after:
            continue
        if before is None:
            add[team] = after
        elif after is None:
            remove[team] = before
        else:
            change[team] = (before, after)
    return MembershipChanges(add=add, change=change, remove=remove)
