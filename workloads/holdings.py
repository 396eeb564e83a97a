"""What holds a team's GPUs on a cluster: every kind of workload counts against the same quota,
so the quota check (``workloads.quota.check_quota``) must see them all.

Each workload app (``gpujobs``: its unfinished jobs; ``serving``: its services' replicas)
registers, in its ``AppConfig.ready``, a function giving the GPUs of one kind its workloads of a
team hold on a cluster; ``quota.quota_left`` sums them. This package never imports those apps:
the dependency points from them to it.
"""

from __future__ import annotations

from collections.abc import Callable

from clusters.models import Cluster
from tenants.models import Team

# (team=, cluster=, gpu_resource=) -> GPUs held.
Holder = Callable[..., int]

_holders: dict[str, Holder] = {}


def register(what: str, held: Holder) -> None:
    """Count ``held`` against teams' quotas, named ``what`` in messages ("its services")."""
    _holders[what] = held


def held_by_each(*, team: Team, cluster: Cluster, gpu_resource: str) -> tuple[tuple[str, int], ...]:
    """(what, GPUs) held by each registered kind of workload, in the order they registered."""
    return tuple(
        (what, held(team=team, cluster=cluster, gpu_resource=gpu_resource))
        for what, held in _holders.items()
    )
