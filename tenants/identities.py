"""Which portal usernames can be identities on a cluster. Pure.

A member acts on a cluster as ``<cluster's user prefix><username>`` (``portal:lena``), the name
the cluster's authenticator (OIDC, client certificates) gives them, and the portal binds that
name in the team's namespace. A username that could not be such an identity, or that would name
someone else, is refused when a user is created or renamed and when a membership is set, and
never bound:

* a ``:`` anywhere: it separates the prefix from the rest, so ``team:vision`` would read as the
  team's group (``portal:team:vision``), and Kubernetes' own identities are ``system:...``
  (the cluster's user prefix may not start with ``system:`` either);
* spaces and control characters, which no authenticator hands out;
* the empty name.
"""

from __future__ import annotations

from clusters.vocabulary import SYSTEM_IDENTITY_PREFIX

MAX_IDENTITY_LENGTH = 253


def identity_refusal(username: str) -> str | None:
    """Why ``username`` cannot be a cluster identity, in words; None when it can."""
    if not isinstance(username, str) or not username:
        return "A username is needed."
    if username.lower().startswith(SYSTEM_IDENTITY_PREFIX.rstrip(":")) and ":" in username:
        return (
            f"{username!r} starts with {SYSTEM_IDENTITY_PREFIX!r}, which Kubernetes keeps for "
            "itself."
        )
    if ":" in username:
        return (
            f"{username!r} has a ':', which cannot be in a cluster identity (it separates the "
            "cluster's user prefix and the team groups from the name)."
        )
    # Any whitespace, or a character that is not printable (at C speed: a sweep asks this of
    # every member of every team).
    if not username.isprintable() or username.split() != [username]:
        return f"{username!r} has spaces or control characters."
    if len(username) > MAX_IDENTITY_LENGTH:
        return f"A username has at most {MAX_IDENTITY_LENGTH} characters."
    return None


def is_cluster_identity(username: str) -> bool:
    return identity_refusal(username) is None


def user_identity(username: str, user_prefix: str) -> str:
    """The name a user has on a cluster: ``portal:lena``."""
    return f"{user_prefix}{username}"
