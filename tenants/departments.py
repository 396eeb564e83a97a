"""Changes to departments: create and update them (never into a cycle), put teams in them, set
their admins and their ceilings. Portal admins only: a department admin changing their own
ceiling or admins would widen what was delegated to them.

As in ``tenants.services``: validate, then write in one transaction with an audit event.
Department rows are locked (all of them, in id order) while the tree changes, so two admins
re-parenting at once cannot close a cycle between them.
"""

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from clusters.models import Cluster
from clusters.vocabulary import DEFAULT_GPU_RESOURCE
from tenants import department_tree
from tenants.audit import audit, save_audited, snapshot
from tenants.errors import refuse_taken_slug
from tenants.models import AuditEvent, Department, DepartmentCeiling, Team
from tenants.permissions import is_portal_admin
from tenants.quota_checks import unknown_gpu_model
from tenants.reconcile_triggers import request_cohort_reconcile

Action = AuditEvent.Action

# Above this a ceiling is a typo (and would not fit its column).
MAX_CEILING_GPUS = 1_000_000

# Marks "leave the parent as it is" (None means "no parent").
UNCHANGED = object()


def _require_admin(actor: User, what: str) -> None:
    if not is_portal_admin(actor):
        raise PermissionDenied(f"Only portal admins can {what}.")


def _lock_tree() -> dict[int, int | None]:
    """Lock every department row (in id order) and return the tree as it is now."""
    rows = Department.objects.select_for_update().order_by("pk").values_list("pk", "parent_id")
    return dict(rows)


def check_parent(department: Department | None, parent: Department | None, parents) -> None:
    """A department may not be nested in itself, however deep."""
    if department is None or parent is None:
        return
    if department_tree.would_cycle(department.pk, parent.pk, parents):
        path = " → ".join(
            Department.objects.get(pk=pk).slug
            for pk in reversed(department_tree.chain(parent.pk, parents))
        )
        raise ValidationError(
            {
                "parent": f"Would make a cycle: {parent.slug} is {department.slug} or nested in "
                f"it ({path})."
            }
        )


def department_create(
    *, actor: User, slug: str, name: str, parent: Department | None = None
) -> Department:
    _require_admin(actor, "create departments")
    department = Department(slug=slug, name=name, parent=parent)
    with refuse_taken_slug("department", slug), transaction.atomic():
        save_audited(
            actor=actor,
            instance=department,
            action=Action.DEPARTMENT_CREATED,
            team=None,
            before=None,
        )
    return department


def department_update(
    *,
    actor: User,
    department: Department,
    slug: str | None = None,
    name: str | None = None,
    parent=UNCHANGED,
) -> Department:
    """Rename a department or move it under another (``parent``; None: to the top)."""
    _require_admin(actor, "change departments")
    with refuse_taken_slug("department", slug), transaction.atomic():
        parents = _lock_tree()
        locked = Department.objects.get(pk=department.pk)
        before = snapshot(locked)
        if parent is not UNCHANGED:
            check_parent(locked, parent, parents)
            locked.parent = parent
        if slug is not None:
            locked.slug = slug
        if name is not None:
            locked.name = name
        if save_audited(
            actor=actor,
            instance=locked,
            action=Action.DEPARTMENT_UPDATED,
            team=None,
            before=before,
        ):
            _cohorts_follow(locked, before, parents)
    return locked


def _cohorts_follow(department: Department, before: dict, parents: dict) -> None:
    """In Kueue mode a department is a cohort named after its slug, under its parent's: once
    it moved or was renamed, the clusters of the teams in it (however deep) follow, and so do
    the queues of the teams directly in it when the name changed."""
    moved = before["parent_id"] != department.parent_id
    renamed = before["slug"] != department.slug
    if not (moved or renamed):
        return
    parents = {**parents, department.pk: department.parent_id}
    subtree = department_tree.subtree(department.pk, parents)
    team_ids = Team.objects.filter(department_id__in=subtree).values_list("pk", flat=True)
    direct = Team.objects.filter(department=department).values_list("pk", flat=True)
    request_cohort_reconcile(
        team_ids=list(team_ids), queue_team_ids=list(direct) if renamed else []
    )


def department_set_admins(*, actor: User, department: Department, admins: list[User]) -> Department:
    """Make exactly these users the department's admins."""
    _require_admin(actor, "set department admins")
    with transaction.atomic():
        locked = Department.objects.select_for_update().get(pk=department.pk)
        before = sorted(locked.admins.values_list("username", flat=True))
        after = sorted({user.username for user in admins})
        if before == after:
            return locked
        locked.admins.set(admins)
        audit(
            actor=actor,
            action=Action.DEPARTMENT_ADMINS_SET,
            target=locked,
            team=None,
            before={"admins": before},
            after={"admins": after},
        )
    return locked


def team_set_department(*, actor: User, team: Team, department: Department | None) -> Team:
    """Put the team in a department, or in none."""
    _require_admin(actor, "move teams between departments")
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        new_id = department.pk if department else None
        if locked.department_id == new_id:
            return locked
        before = {"department_id": locked.department_id}
        locked.department = department
        locked.save(update_fields=["department"])
        audit(
            actor=actor,
            action=Action.TEAM_DEPARTMENT_SET,
            target=locked,
            team=locked,
            before=before,
            after={"department_id": new_id},
        )
        request_cohort_reconcile(team_ids=[locked.pk], queue_team_ids=[locked.pk])
    return locked


def check_ceiling(*, cluster: Cluster, gpu_resource: str, gpu_model: str, gpus) -> None:
    """One ValidationError naming every bad field: a whole number of GPUs, not below zero nor
    absurdly high, of a model some node of the cluster has."""
    errors = {}
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        errors["gpus"] = "Must be a whole number of GPUs, zero or more."
    elif gpus > MAX_CEILING_GPUS:
        errors["gpus"] = f"At most {MAX_CEILING_GPUS:,} GPUs; {gpus:,} is a typo."
    unknown = unknown_gpu_model(cluster=cluster, gpu_resource=gpu_resource, gpu_model=gpu_model)
    if unknown:
        errors["gpu_model"] = unknown
    if errors:
        raise ValidationError(errors)


def department_set_ceiling(
    *,
    actor: User,
    department: Department,
    cluster: Cluster,
    gpu_model: str,
    gpus: int | None,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
) -> DepartmentCeiling | None:
    """Set the department's ceiling for a GPU model on a cluster, or remove it (``gpus`` None).
    A ceiling below what the teams hold already is allowed: it stops further delegated
    approvals and takes nothing away."""
    _require_admin(actor, "set department ceilings")
    if gpus is not None:
        check_ceiling(cluster=cluster, gpu_resource=gpu_resource, gpu_model=gpu_model, gpus=gpus)
    with transaction.atomic():
        ceiling = (
            DepartmentCeiling.objects.select_for_update()
            .filter(
                department=department,
                cluster=cluster,
                gpu_resource=gpu_resource,
                gpu_model=gpu_model,
            )
            .first()
        )
        before = snapshot(ceiling) if ceiling else None
        if gpus is None:
            if ceiling is None:
                return None  # no ceiling to remove
        elif ceiling is None:
            ceiling = DepartmentCeiling.objects.create(
                department=department,
                cluster=cluster,
                gpu_resource=gpu_resource,
                gpu_model=gpu_model,
                gpus=gpus,
            )
        elif ceiling.gpus != gpus:
            ceiling.gpus = gpus
            ceiling.save(update_fields=["gpus", "updated_at"])
        else:
            return ceiling
        audit(
            actor=actor,
            action=Action.DEPARTMENT_CEILING_SET,
            target=ceiling,
            team=None,
            before=before,
            after=None if gpus is None else snapshot(ceiling),
        )
        if gpus is None:
            ceiling.delete()  # after its event, which names its id
            return None
    return ceiling
