"""What a team's quota leaves on a cluster, and the check every workload's GPUs must pass: the
grants in effect today, less what every kind of workload of the team holds there (its jobs, its
services' replicas: ``workloads.holdings``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db.models import Q, Sum
from django.utils import timezone

from clusters.models import Cluster
from tenants.models import QuotaGrant, Team
from workloads import holdings
from workloads.pod_states import QUOTA_USED_UP


@dataclass(frozen=True)
class QuotaLeft:
    """A team's GPUs of one kind on one cluster: granted (grants in effect today), held by each
    kind of workload (what, GPUs; in the order the apps registered them), and what is left for
    new ones."""

    granted: int
    held_by: tuple[tuple[str, int], ...] = ()

    @property
    def held(self) -> int:
        return sum(gpus for _, gpus in self.held_by)

    @property
    def left(self) -> int:
        return max(self.granted - self.held, 0)

    @property
    def held_words(self) -> str:
        """``3 held by its unfinished jobs`` (the first kind, always named), or with other
        holders ``5 held (3 by its unfinished jobs, 2 by its services)``."""
        if not self.held_by:
            return "0 held"
        (first, first_gpus), others = self.held_by[0], [h for h in self.held_by[1:] if h[1]]
        if not others:
            return f"{first_gpus} held by {first}"
        parts = [f"{first_gpus} by {first}", *(f"{gpus} by {what}" for what, gpus in others)]
        return f"{self.held} held ({', '.join(parts)})"


def quota_left(*, team: Team, cluster: Cluster, gpu_resource: str) -> QuotaLeft:
    """The team's granted and held GPUs of a kind on the cluster (it runs under the team's row
    lock on every submission)."""
    today = timezone.localdate()
    granted = QuotaGrant.objects.filter(
        Q(ends_on__isnull=True) | Q(ends_on__gte=today),
        team=team,
        cluster=cluster,
        gpu_resource=gpu_resource,
        state=QuotaGrant.State.ACTIVE,
        starts_on__lte=today,
    ).aggregate(total=Sum("gpus"))["total"]
    held_by = holdings.held_by_each(team=team, cluster=cluster, gpu_resource=gpu_resource)
    return QuotaLeft(granted=granted or 0, held_by=held_by)


def check_quota(
    *,
    team: Team,
    cluster: Cluster,
    gpu_resource: str,
    gpus: int,
    asking: str = "this job asks for",
    field: str = "gpus",
) -> None:
    """The workload's GPUs must fit in what the team's grants in effect leave after everything
    it runs already: its unfinished jobs and its services' replicas (``quota_left``). The caller
    must hold the team's row lock, or two submissions could both fit. ``asking`` says in the
    message what asks for the ``gpus`` ("scaling up asks for 2 replicas x 2 GPUs ="), and
    ``field`` which field is refused."""
    figures = quota_left(team=team, cluster=cluster, gpu_resource=gpu_resource)
    if gpus <= figures.left:
        return
    over = gpus - figures.left
    if figures.granted == 0:
        text = (
            f"{QUOTA_USED_UP}: team {team.slug} has no {gpu_resource} quota in effect on "
            f"cluster {cluster.name}, so 0 are left; {asking} {gpus}, exceeding it by "
            f"{over}. A team lead can request quota."
        )
    else:
        text = (
            f"{QUOTA_USED_UP}: team {team.slug} has {figures.granted} × {gpu_resource} on "
            f"cluster {cluster.name}, {figures.held_words}, so {figures.left} left; {asking} "
            f"{gpus}, exceeding it by {over}."
        )
    raise ValidationError({field: text})
