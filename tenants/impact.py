"""What shrinking, revoking or ending a grant would do to the team's running work: its quota
after the change against what its jobs and services hold now, and which of them would then be
over quota.

The quota in question is what the cluster enforces:

* quota only: the team's ResourceQuota, one figure per GPU kind, whatever the model: every grant
  of that kind in effect today, against all the team's work of that kind;
* Kueue: the team's ClusterQueue, one nominal quota per GPU model (flavor): the grants of the
  grant's model (or of "any model", for a grant that names none), against the work Kueue
  admitted on that model's flavor (work not admitted yet: the work that asked for that model).

Which work is over quota: the running work is taken oldest first (by when it started, a
service by when it was made) and kept while its GPUs still fit the new quota; the first that
does not fit, and every newer one, are over. Said otherwise: the newest are dropped first until
the team fits. Nothing is stopped: neither the ResourceQuota nor Kueue evicts what already runs
when a quota shrinks; the work keeps running until it ends, and new work (or a pod that is
recreated) waits in the queue (Kueue) or is refused (quota only) until the team fits again.

The workloads come from the apps that run them (``gpujobs``, ``serving``): each registers, in
its ``AppConfig.ready``, a function listing a team's workloads of one GPU kind on a cluster, one
query each, so a preview costs a constant number of queries. This app never imports them.
(``workloads.holdings`` is the same pattern for the quota check, which needs sums, not items.)
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q, Sum
from django.utils import timezone

from clusters.models import QuotaMode
from clusters.vocabulary import DEFAULT_PORTAL_NAME, resource_flavor_name
from tenants.grant_periods import in_effect
from tenants.models import QuotaGrant

RULE = (
    "Running work is kept oldest first while it fits the new quota; the first that does not "
    "fit, and everything newer, is over quota (the newest go first)."
)


@dataclass(frozen=True)
class Work:
    """One workload holding (or waiting for) a team's GPUs: a job or a service."""

    kind: str  # "job" / "service"
    id: int
    name: str
    gpus: int
    gpu_model: str  # as it asked for it; empty: any model
    since: datetime.datetime  # when it started (a job) or was made (a service)
    running: bool  # holds its GPUs now (else it waits for them)
    url: str = ""
    flavor: str = ""  # Kueue: the ResourceFlavor it was admitted on ("" if none)


# (team=, cluster=, gpu_resource=) -> the team's unfinished work of that GPU kind.
Lister = Callable[..., list[Work]]

_listers: dict[str, Lister] = {}


def register(kind: str, lister: Lister) -> None:
    """List ``kind`` workloads in impact previews."""
    _listers[kind] = lister


@dataclass(frozen=True)
class Impact:
    """What a change to one grant would do today."""

    grant: QuotaGrant
    gpus_after: int  # the grant's GPUs after the change (0: revoked or ended)
    kueue: bool
    gpu_model: str | None  # the quota's scope: None: every model of the kind (quota only)
    quota_now: int
    quota_after: int
    held: int  # by the running work in scope
    over_quota: tuple[Work, ...]  # newest first
    waiting: tuple[Work, ...]  # unfinished work in scope that holds nothing yet
    in_effect: bool  # the grant counts today (a future or ended grant changes nothing now)

    @property
    def over_by(self) -> int:
        return max(self.held - self.quota_after, 0)

    @property
    def consequence(self) -> str:
        """What happens to the running work, in words."""
        if not self.over_quota:
            return f"Everything the team runs still fits its {self.quota_after} GPUs."
        new_work = (
            "new work waits in the team's queue"
            if self.kueue
            else "new work (and any pod that is recreated) is refused"
        )
        return (
            f"Nothing is stopped: the work over quota keeps running until it ends; until the "
            f"team holds at most {self.quota_after} GPUs, {new_work}."
        )


def over_quota(work: Iterable[Work], quota: int) -> list[Work]:
    """The running work that does not fit ``quota`` (the module's rule), newest first."""
    running = sorted((w for w in work if w.running), key=lambda w: (w.since, w.kind, w.id))
    held = 0
    for index, item in enumerate(running):
        held += item.gpus
        if held > quota:
            return running[index:][::-1]
    return []


def in_scope(work: Sequence[Work], *, gpu_model: str | None, flavor: str = "") -> list[Work]:
    """The work that counts against a quota of ``gpu_model`` (None: of every model): in Kueue
    mode, what was admitted on its ``flavor``, or asked for the model when not admitted."""
    if gpu_model is None:
        return list(work)
    return [w for w in work if (w.flavor == flavor if w.flavor else w.gpu_model == gpu_model)]


def impact_of(
    *,
    grant: QuotaGrant,
    gpus_after: int,
    kueue: bool,
    quota_now: int,
    work: Sequence[Work],
    today: datetime.date,
    portal_name: str = DEFAULT_PORTAL_NAME,
) -> Impact:
    """The arithmetic, without the database: ``quota_now`` is the team's quota in the grant's
    scope today, ``work`` the team's unfinished work of the grant's GPU kind."""
    gpu_model = (grant.gpu_model or "") if kueue else None
    effective = in_effect(grant, today)
    quota_after = quota_now - grant.gpus + gpus_after if effective else quota_now
    flavor = resource_flavor_name(portal_name, gpu_model) if gpu_model is not None else ""
    scoped = in_scope(work, gpu_model=gpu_model, flavor=flavor)
    return Impact(
        grant=grant,
        gpus_after=gpus_after,
        kueue=kueue,
        gpu_model=gpu_model,
        quota_now=quota_now,
        quota_after=max(quota_after, 0),
        held=sum(w.gpus for w in scoped if w.running),
        over_quota=tuple(over_quota(scoped, max(quota_after, 0))),
        waiting=tuple(
            sorted((w for w in scoped if not w.running), key=lambda w: (w.since, w.kind, w.id))
        ),
        in_effect=effective,
    )


def team_quota(*, grant: QuotaGrant, kueue: bool, today: datetime.date) -> int:
    """The team's GPUs in the grant's scope from the grants in effect today (one query)."""
    grants = QuotaGrant.objects.filter(
        Q(ends_on__isnull=True) | Q(ends_on__gte=today),
        team_id=grant.team_id,
        cluster_id=grant.cluster_id,
        gpu_resource=grant.gpu_resource,
        state=QuotaGrant.State.ACTIVE,
        starts_on__lte=today,
    )
    if kueue:
        grants = grants.filter(gpu_model=grant.gpu_model or "")
    return grants.aggregate(total=Sum("gpus"))["total"] or 0


def grant_change_impact(
    *, grant: QuotaGrant, new_gpus: int = 0, today: datetime.date | None = None
) -> Impact:
    """What giving ``grant`` ``new_gpus`` GPUs (0: revoking or ending it) would do today to the
    team's running work on its cluster. A constant number of queries: the team's quota, and one
    per registered kind of workload."""
    today = today or timezone.localdate()
    kueue = grant.cluster.quota_mode == QuotaMode.KUEUE
    work: list[Work] = []
    for lister in _listers.values():
        work += lister(team=grant.team, cluster=grant.cluster, gpu_resource=grant.gpu_resource)
    return impact_of(
        grant=grant,
        gpus_after=new_gpus,
        kueue=kueue,
        quota_now=team_quota(grant=grant, kueue=kueue, today=today),
        work=work,
        today=today,
        portal_name=settings.PORTAL_NAME,
    )


def gpus_after_shrink(
    *, grant: QuotaGrant, gpus: int | None, ends_on: datetime.date | None, today: datetime.date
) -> int:
    """The grant's GPUs today after shrinking it to ``gpus`` and/or ending it on ``ends_on``
    (None: unchanged): an end before today ends it now."""
    if ends_on is not None and ends_on < today:
        return 0
    return grant.gpus if gpus is None else gpus
