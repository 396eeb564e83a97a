"""Whether a team may run a session on a cluster: every workload's rules (``workloads.admission``:
the team, its namespace, the allowed registries, the GPU kinds and models offered), the team's
budgets for a GPU session (never opportunistic work), and the session's own: a run no longer
than the team's maximum lifetime, and a home volume that fits what the team's storage quota
leaves. By field, so that one 400 names every bad one.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Sum

from billing.enforcement import budget_refusal
from clusters.models import Cluster
from clusters.vocabulary import OBJECT_LIMIT_STORAGE
from interactive.models import HomeVolume, policy_for
from interactive.specs import SessionRequest
from reconcile.manifests import parse_quantity
from tenants.models import Team
from tenants.object_limits import team_object_limits
from workloads.admission import check_gpus, check_image, check_namespace, check_team
from workloads.specs import Errors

GIB = 2**30


def home_volume_of(*, team: Team, cluster: Cluster, owner: User) -> HomeVolume | None:
    return HomeVolume.objects.filter(team=team, cluster=cluster, owner=owner).first()


def storage_left_gib(*, team: Team, cluster: Cluster) -> int | None:
    """GiB the team's storage quota on the cluster leaves for a new home volume (None: no cap),
    counting its members' home volumes."""
    cap = parse_quantity(team_object_limits(team=team, cluster=cluster).get(OBJECT_LIMIT_STORAGE))
    if cap is None:
        return None
    used = HomeVolume.objects.filter(team=team, cluster=cluster).aggregate(total=Sum("size_gib"))
    return max(int(cap // GIB) - (used["total"] or 0), 0)


def session_refusals(
    *, team: Team, cluster: Cluster, owner: User, request: SessionRequest
) -> Errors:
    """Every rule of the team and the cluster the session breaks, by field (GPU quota aside:
    ``workloads.quota``, under the team's lock)."""
    errors: Errors = {}
    check_team(team, errors=errors, what="sessions")
    check_namespace(team, cluster=cluster, errors=errors, what="session")
    check_image(request.main.image, cluster=cluster, errors=errors, key="image")
    if request.gpus:
        check_gpus(
            cluster=cluster,
            gpu_resource=request.gpu_resource,
            gpu_model=request.gpu_model,
            errors=errors,
        )
    if request.gpus and "gpus" not in errors:
        refusal = budget_refusal(team=team, cluster=cluster, gpu_model=request.gpu_model)
        if refusal:
            errors["gpus"] = refusal
    policy = policy_for(team)
    if request.max_lifetime_hours > policy.max_lifetime_hours:
        errors["max_lifetime_hours"] = (
            f"Team {team.slug}'s sessions may run at most {policy.max_lifetime_hours} hours at "
            f"a time; {request.max_lifetime_hours} were asked for. Resume it when it stops."
        )
    errors.update(storage_refusal(team=team, cluster=cluster, owner=owner, request=request))
    return errors


def storage_refusal(
    *, team: Team, cluster: Cluster, owner: User, request: SessionRequest
) -> Errors:
    """A first home volume must fit what the team's storage quota leaves (a member who has one
    keeps it, whatever size is asked)."""
    if home_volume_of(team=team, cluster=cluster, owner=owner) is not None:
        return {}
    left = storage_left_gib(team=team, cluster=cluster)
    if left is None or request.home_gib <= left:
        return {}
    return {
        "home_gib": f"A {request.home_gib} GiB home volume does not fit team {team.slug}'s "
        f"storage quota on cluster {cluster.name}: {left} GiB are left. Ask for less, or ask an "
        "admin to raise the team's storage quota."
    }
