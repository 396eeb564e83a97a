"""A cluster's settings that admins change in the portal (its page and the API) rather than in
the Django admin: the image registries its team namespaces may pull from.

Admins only; validated first (the entries as ``clusters.models.validate_allowed_registries``
reads them), written under the cluster's row lock in one transaction with an audit event
(``cluster.settings_changed``, as a change in the Django admin is recorded), and brought to the
cluster by its cluster-wide reconcile after commit: the registries are in its admission policies
(``reconcile.admission_policies``), which hold for everything in the team namespaces. The portal's
own job checks read the row, so they follow at once.
"""

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clusters.image_references import MAX_NAME_LENGTH, parse_registry_entry
from clusters.models import Cluster, validate_allowed_registries
from tenants.audit import audit, snapshot
from tenants.models import AuditEvent
from tenants.permissions import is_portal_admin
from tenants.reconcile_triggers import request_cluster_reconcile_after_commit

# Each entry is two comparisons in the admission policy's CEL, for every container of every pod:
# a cluster needs a handful (paths under a registry cover the rest).
MAX_ALLOWED_REGISTRIES = 50
# An entry longer than the longest repository name the runtime accepts matches no image.
MAX_REGISTRY_ENTRY_LENGTH = MAX_NAME_LENGTH


def check_allowed_registries(value) -> list[str]:
    """The registry entries as they are stored: surrounding blanks and a trailing ``/``
    dropped, each registry once (compared as images are matched, so ``NVCR.IO`` is
    ``nvcr.io``), in the order given. A ValidationError on ``allowed_registries`` otherwise."""
    if isinstance(value, list) and len(value) > MAX_ALLOWED_REGISTRIES:
        raise ValidationError(
            {
                "allowed_registries": f"At most {MAX_ALLOWED_REGISTRIES} registries "
                f"({len(value)} were given): list a registry once rather than its paths."
            }
        )
    if isinstance(value, list):
        long = [e for e in value if isinstance(e, str) and len(e) > MAX_REGISTRY_ENTRY_LENGTH]
        if long:
            raise ValidationError(
                {
                    "allowed_registries": f"An entry is at most {MAX_REGISTRY_ENTRY_LENGTH} "
                    f"characters ({long[0][:40]!r}... has {len(long[0])})."
                }
            )
    try:
        validate_allowed_registries(value)
    except ValidationError as error:
        raise ValidationError({"allowed_registries": error.messages}) from None
    entries: list[str] = []
    seen: set[str] = set()
    for entry in value:
        normalised = parse_registry_entry(entry)
        if normalised in seen:
            continue
        seen.add(normalised)
        entries.append(entry.strip().rstrip("/"))
    return entries


def cluster_set_registries(
    *,
    actor: User,
    cluster: Cluster,
    allowed_registries: list[str] | None = None,
    allow_all_registries: bool | None = None,
) -> Cluster:
    """Set the registries every container in the cluster's team namespaces may pull from (a
    host, or a path under one; empty: none) and whether any registry goes regardless. None
    leaves a setting as it is. Nothing changed, nothing recorded."""
    if not is_portal_admin(actor):
        raise PermissionDenied("Only portal admins can change a cluster's allowed registries.")
    errors: dict[str, list[str]] = {}
    entries = None
    if allowed_registries is not None:
        try:
            entries = check_allowed_registries(allowed_registries)
        except ValidationError as error:
            errors.update(error.message_dict)
    if allow_all_registries is not None and not isinstance(allow_all_registries, bool):
        errors["allow_all_registries"] = ["Must be true or false."]
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        before = snapshot(locked)
        if entries is not None:
            locked.allowed_registries = entries
        if allow_all_registries is not None:
            locked.allow_all_registries = allow_all_registries
        after = snapshot(locked)
        if after == before:
            return locked
        locked.save(update_fields=["allowed_registries", "allow_all_registries"])
        audit(
            actor=actor,
            action=AuditEvent.Action.CLUSTER_SETTINGS_CHANGED,
            target=locked,
            team=None,
            before=before,
            after=after,
        )
        # Only the cluster-wide pass: the registries are in its admission policies, not in
        # anything of a team's namespace.
        request_cluster_reconcile_after_commit(cluster_id=locked.pk)
    return locked
