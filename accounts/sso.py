"""Single sign-on: who a provider's claims name, and what their groups give them.

``sso_sign_in`` runs at each sign-in through the OpenID provider (``accounts.oidc``), with the
claims of its userinfo answer. It checks everything first (the claims, the group mapping, the
username), so a refusal changes nothing; then, in one transaction, it finds or creates the user,
records their identity and sign-in, and applies their groups (``tenants.group_sync``).

Which portal user a sign-in is: the one linked to the provider's subject (``sub``); else, the
first time, a new user of that username, with no password. A first sign-in is never linked to
an account that exists already by its username alone (a local or break-glass account, or one an
admin made, is never taken over by a provider's user of the same name): it is refused, and an
admin renames or deletes that account.

``sso_expire_stale_sign_ins`` (the periodic sync) withdraws what the groups of a sign-in older than
``OIDC_SIGN_IN_MAX_AGE_HOURS`` gave: without the user's sign-in the portal cannot read their
groups, and someone taken out of a group at the provider must not keep the team for good.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import OidcIdentity
from tenants import group_sync
from tenants.group_mapping import (
    GroupMappingError,
    MalformedGroupsClaim,
    parse_group_mapping,
    parse_groups_claim,
)
from tenants.identities import identity_refusal
from tenants.models import Membership

logger = logging.getLogger(__name__)

MAX_SUBJECT_LENGTH = 255


class SignInRefused(Exception):
    """A single sign-on the portal refuses; the message tells the person why."""


def _refuse(message: str) -> SignInRefused:
    logger.warning("Single sign-on refused: %s", message)
    return SignInRefused(message)


def check_claims(claims: Mapping[str, Any]) -> tuple[str, str, list[str]]:
    """The subject, username and groups of the claims; ``SignInRefused`` saying what is wrong."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT_LENGTH:
        raise _refuse("The provider did not say who you are (no usable 'sub' claim).")
    username_claim = settings.OIDC_USERNAME_CLAIM
    username = claims.get(username_claim)
    if not isinstance(username, str) or not username:
        raise _refuse(f"The provider sent no username (the {username_claim!r} claim).")
    refusal = identity_refusal(username)
    if refusal:
        raise _refuse(f"Your username cannot be used here: {refusal}")
    try:
        groups = parse_groups_claim(claims.get(settings.OIDC_GROUPS_CLAIM))
    except MalformedGroupsClaim as error:
        raise _refuse(
            f"Sign-in refused: {error} (claim {settings.OIDC_GROUPS_CLAIM!r}). Nothing was "
            "changed; ask your administrator to check the provider's groups mapper."
        ) from error
    return subject, username, groups


def group_rules() -> dict:
    try:
        return parse_group_mapping(settings.OIDC_GROUP_MAPPING)
    except GroupMappingError as error:
        raise _refuse(f"Single sign-on is misconfigured: {error}") from error


def sso_sign_in(*, claims: Mapping[str, Any]) -> User:
    """The user the claims name, created or updated, with their groups applied."""
    subject, username, groups = check_claims(claims)
    rules = group_rules()
    try:
        return _sign_in(
            subject=subject, username=username, groups=groups, rules=rules, claims=claims
        )
    except IntegrityError:
        # Two first sign-ins of one person at once (two tabs): both found no user, one created
        # it. Once more, this one finds it.
        return _sign_in(
            subject=subject, username=username, groups=groups, rules=rules, claims=claims
        )


def _sign_in(
    *, subject: str, username: str, groups: list[str], rules: dict, claims: Mapping[str, Any]
) -> User:
    with transaction.atomic():
        identity = (
            OidcIdentity.objects.select_for_update().select_related("user").filter(subject=subject)
        ).first()
        if identity is not None:
            user = identity.user
        else:
            user = _first_sign_in_user(username=username, claims=claims)
        if not user.is_active:
            raise _refuse(f"The account {user.username} is deactivated.")
        _update_profile(user, claims)
        OidcIdentity.objects.update_or_create(
            user=user,
            defaults={"subject": subject, "last_sign_in_at": timezone.now(), "groups": groups},
        )
        try:
            group_sync.user_groups_sync(user=user, groups=groups, rules=rules, why="Single sign-on")
        except ValidationError as error:  # say, a username no cluster could name
            raise _refuse(" ".join(error.messages)) from error
    user.refresh_from_db()  # the sync may have changed its admin flags
    return user


def _first_sign_in_user(*, username: str, claims: Mapping[str, Any]) -> User:
    if User.objects.filter(username=username).exists():
        if OidcIdentity.objects.filter(user__username=username).exists():
            raise _refuse(
                f"The username {username} belongs to another single sign-on account; ask an admin."
            )
        raise _refuse(
            f"The portal account {username} was not made by single sign-on, so it is not "
            "linked to your sign-in by its name: ask an admin to rename or delete it."
        )
    return User.objects.create_user(username, email=_text(claims, "email"))


def _text(claims: Mapping[str, Any], name: str, limit: int = 150) -> str:
    value = claims.get(name)
    return value[:limit] if isinstance(value, str) else ""


def _update_profile(user: User, claims: Mapping[str, Any]) -> None:
    profile = {
        "email": _text(claims, "email", 254),
        "first_name": _text(claims, "given_name"),
        "last_name": _text(claims, "family_name"),
    }
    changed = [name for name, value in profile.items() if value and getattr(user, name) != value]
    for name in changed:
        setattr(user, name, profile[name])
    if changed:
        user.save(update_fields=changed)


def sso_expire_stale_sign_ins(*, now: datetime.datetime | None = None) -> int:
    """Withdraw what the groups of each sign-in older than ``OIDC_SIGN_IN_MAX_AGE_HOURS`` gave
    (as a sign-in in no group would); how many users lost something. Safe to run again."""
    now = now or timezone.now()
    cutoff = now - datetime.timedelta(hours=settings.OIDC_SIGN_IN_MAX_AGE_HOURS)
    rules = parse_group_mapping(settings.OIDC_GROUP_MAPPING)
    managed = {rule.team for rule in rules.values() if rule.team}
    gives_admin = any(rule.admin for rule in rules.values())
    stale = OidcIdentity.objects.filter(last_sign_in_at__lt=cutoff).select_related("user")
    expired = 0
    for identity in stale.order_by("pk"):
        user = identity.user
        holds = Membership.objects.filter(user=user, team__slug__in=managed).exists() or (
            gives_admin and (user.is_staff or user.is_superuser)
        )
        if not holds:
            continue
        with transaction.atomic():
            group_sync.user_groups_sync(
                user=user,
                groups=[],
                rules=rules,
                why=f"Sign-in older than {settings.OIDC_SIGN_IN_MAX_AGE_HOURS} h",
            )
            OidcIdentity.objects.filter(pk=identity.pk).update(groups=[])
        expired += 1
    return expired
