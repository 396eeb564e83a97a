"""What a cluster in Kueue mode should hold for the portal's queues, as the plain dicts the
Kubernetes API takes. Pure functions: no database, no network. ``reconcile.cluster_pass``
applies the cluster-wide objects, ``reconcile.team_pass`` a team's beside its namespace.

Cluster-wide (labelled ``managed-by`` only, no team):

* a ResourceFlavor per GPU model the cluster's nodes carry (``GpuModelCapacity``), named
  ``<portal>-<model>`` (``resource_flavor_name``), whose node labels are the cluster's GPU node
  selector plus the model label, with the GPU taint's toleration (Kueue puts both on the pods
  it admits); one more, ``<portal>-any-gpu``, with the GPU node selector only, for grants that
  name no model; and ``<portal>-cpu-memory``, without labels, for the CPU and memory every pod
  also asks for (Kueue admits a pod only when its ClusterQueue covers every resource it
  requests, including what the namespace's LimitRange adds);
* the WorkloadPriorityClasses ``<portal>-guaranteed`` (1000), ``<portal>-opportunistic``
  (100) and ``<portal>-opportunistic-protected`` (1000) that the job side puts on Jobs: the
  last on borrowers within the cluster's minimum run time (``Cluster.borrower_min_runtime_
  seconds``), whose queues then preempt only lower priorities (``_reclaim``), so that nobody
  preempts a protected borrower until ``gpujobs.borrower_protection`` lowers it;
* the cohort tree (``cohorts``), mirroring the departments: the root Cohort ``<portal>`` and one
  Cohort ``<portal>-department-<slug>`` per department a team of the cluster is in (and each
  of their ancestors), whose ``parentName`` is its parent department's cohort or the root. A
  team's queues are in its department's cohort (the root without one); what a department's
  teams leave idle is lent to the other departments' teams through the root, so sharing across
  departments stays. The cohorts carry no quota or limits
  of their own: a department's ceiling bounds what its admins may approve, not what its teams
  may borrow.

Per team (labelled like the team's other objects):

* TWO ClusterQueues, both in the team's department's cohort (the root without one), both
  taking only the team's namespace, both listing every GPU flavor of the cluster (so a team
  can borrow models it has no grant of):

  - ``<portal>-<team>`` for guaranteed work: ``nominalQuota`` per flavor and GPU kind is the
    sum of the team's grants in effect for that model (grants without a model on the any-gpu
    flavor), ``borrowingLimit`` 0 on everything, so its work never borrows and is therefore
    never preempted to give GPUs back; ``lendingLimit`` from the team's queue policy; it
    reclaims its quota from borrowers by preemption (``reclaimWithinCohort: Any``).
  - ``<portal>-<team>-opportunistic`` for opportunistic work: ``nominalQuota`` 0 everywhere,
    ``borrowingLimit`` per flavor from the policy (none: no limit), preempts nobody.

  Kueue has no per-workload "do not borrow" switch: with a single ClusterQueue per team a
  guaranteed job could be admitted on borrowed GPUs and then preempted, which is what
  guaranteed promises not to happen. Two queues keep the promise and still let the team's own
  idle quota be used by its opportunistic work (it is borrowed from the team's guaranteed
  queue, within the cohort, and reclaimed the same way).
* two LocalQueues in the namespace, ``guaranteed`` and ``opportunistic``, one per queue.

CPU and memory have their own resource group on the cpu-memory flavor: the guaranteed queue's
nominal quota is what the grants give when every grant in effect gives it (as the
ResourceQuota), else the most a request may ever ask for (effectively uncovered); the
opportunistic queue borrows it.

The ResourceQuota stays the hard ceiling (``quota_ceiling``) for whatever is created around
the queues (kubectl, other controllers): the most the team's queues can ever admit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from clusters.vocabulary import (
    GUARANTEED,
    KUEUE_API_VERSION,
    LOCAL_QUEUES,
    MANAGED_BY_LABEL,
    OPPORTUNISTIC,
    PROTECTED_BORROWER,
    TEAM_LABEL,
    cluster_queue_name,
    cohort_name,
    cpu_memory_flavor_name,
    department_cohort_name,
    priority_class_name,
    resource_flavor_name,
)
from reconcile import manifests
from reconcile.manifests import Policy, TeamOnCluster
from tenants import grant_periods
from tenants.models import MAX_CPU_CORES, MAX_MEMORY_GIB

# The node label Kubernetes puts on every namespace: a queue takes only its team's namespace.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Kueue admits higher values first and preempts lower ones for them.
PRIORITY_VALUES = {GUARANTEED: 1000, OPPORTUNISTIC: 100, PROTECTED_BORROWER: 1000}
PRIORITY_DESCRIPTIONS = {
    GUARANTEED: "Runs within the team's own quota; never preempted.",
    OPPORTUNISTIC: "May borrow GPUs other teams leave idle; preempted when they need them back.",
    PROTECTED_BORROWER: "Borrows idle GPUs and is not preempted until it has run the cluster's "
    "minimum run time (the portal then lowers it to opportunistic).",
}


@dataclass(frozen=True)
class KueueCluster:
    """What a cluster's Kueue objects depend on: its GPU kinds and models, and where its GPU
    nodes are."""

    portal_name: str
    gpu_resources: tuple[str, ...] = ()  # GPU kinds the cluster offers, sorted
    gpu_models: tuple[str, ...] = ()  # models its GPU nodes carry, sorted
    gpu_node_selector: tuple[tuple[str, str], ...] = ()
    gpu_taint_key: str = ""
    gpu_model_label: str = ""
    gpu_capacity: tuple[tuple[str, int], ...] = ()  # GPUs per kind the portal plans with
    # Borrowers preempt one another toward their weights (``Cluster.borrowers_share_by_weight``)
    borrowers_share_by_weight: bool = False
    # Borrowers are protected for a minimum run time (``Cluster.borrower_min_runtime_seconds``)
    protects_borrowers: bool = False


@dataclass(frozen=True)
class QueuePolicy:
    """A team's borrowing and lending (GPUs per flavor; None: no limit / lends everything) and
    fair-sharing weight, as ``TeamQueuePolicy`` holds them (its defaults without a row)."""

    borrowing_limit: int | None = None
    lending_limit: int | None = None
    fair_sharing_weight: Decimal = Decimal(1)
    # The opportunistic queue's weight, lowered by the team's decayed use
    # (``reconcile.fair_share``); None: the plain weight.
    borrowing_weight: Decimal | None = None

    def weight(self, kind: str) -> Decimal:
        """The ``fairSharing.weight`` of the team's queue for ``kind`` of work."""
        if kind == OPPORTUNISTIC and self.borrowing_weight is not None:
            return self.borrowing_weight
        return self.fair_sharing_weight


def kueue_cluster(
    *,
    portal_name: str,
    gpu_resources: Iterable[str] = (),
    gpu_models: Iterable[str] = (),
    gpu_node_selector: dict[str, str] | None = None,
    gpu_taint_key: str = "",
    gpu_model_label: str = "",
    gpu_capacity: dict[str, int] | None = None,
    borrowers_share_by_weight: bool = False,
    protects_borrowers: bool = False,
) -> KueueCluster:
    """A ``KueueCluster`` from any iterables (sorted, so equal inputs build equal objects)."""
    return KueueCluster(
        portal_name=portal_name,
        gpu_resources=tuple(sorted(set(gpu_resources))),
        gpu_models=tuple(sorted({m for m in gpu_models if m})),
        gpu_node_selector=tuple(sorted((gpu_node_selector or {}).items())),
        gpu_taint_key=gpu_taint_key,
        gpu_model_label=gpu_model_label,
        gpu_capacity=tuple(sorted((gpu_capacity or {}).items())),
        borrowers_share_by_weight=borrowers_share_by_weight,
        protects_borrowers=protects_borrowers,
    )


# --- cluster-wide objects ----------------------------------------------------------------------


def cluster_labels(portal_name: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: portal_name}


def cluster_ownership_selector(portal_name: str) -> str:
    """The label selector that finds the portal's cluster-wide objects (no team label: a
    team's ClusterQueues are cluster-scoped too, and belong to the team's reconcile)."""
    return f"{MANAGED_BY_LABEL}={portal_name},!{TEAM_LABEL}"


def is_cluster_owned(obj: dict, *, portal_name: str) -> bool:
    found = (obj.get("metadata") or {}).get("labels") or {}
    return found.get(MANAGED_BY_LABEL) == portal_name and TEAM_LABEL not in found


def gpu_flavors(cluster: KueueCluster) -> list[tuple[str, str]]:
    """(flavor name, GPU model) of every GPU flavor, the models' in order, then any-gpu's
    (model ""): Kueue tries a queue's flavors in this order."""
    flavors = [(resource_flavor_name(cluster.portal_name, m), m) for m in cluster.gpu_models]
    return [*flavors, (resource_flavor_name(cluster.portal_name, ""), "")]


def _toleration(cluster: KueueCluster) -> list[dict]:
    if not cluster.gpu_taint_key:
        return []
    return [{"key": cluster.gpu_taint_key, "operator": "Exists", "effect": "NoSchedule"}]


def resource_flavors(cluster: KueueCluster) -> list[dict]:
    flavors = []
    for name, model in gpu_flavors(cluster):
        node_labels = dict(cluster.gpu_node_selector)
        if model:
            node_labels[cluster.gpu_model_label] = model
        spec: dict = {}
        if node_labels:
            spec["nodeLabels"] = node_labels
        if tolerations := _toleration(cluster):
            spec["tolerations"] = tolerations
        flavors.append(_cluster_object("ResourceFlavor", name, cluster, spec=spec))
    flavors.append(
        _cluster_object(
            "ResourceFlavor", cpu_memory_flavor_name(cluster.portal_name), cluster, spec={}
        )
    )
    return flavors


def priority_classes(cluster: KueueCluster) -> list[dict]:
    return [
        {
            **_cluster_object(
                "WorkloadPriorityClass", priority_class_name(cluster.portal_name, kind), cluster
            ),
            "value": PRIORITY_VALUES[kind],
            "description": PRIORITY_DESCRIPTIONS[kind],
        }
        for kind in (*LOCAL_QUEUES, PROTECTED_BORROWER)
    ]


def _cluster_object(kind: str, name: str, cluster: KueueCluster, spec: dict | None = None) -> dict:
    obj = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": cluster_labels(cluster.portal_name)},
    }
    if spec is not None:
        obj["spec"] = spec
    return obj


def team_cohort(portal_name: str, department_slug: str) -> str:
    """The cohort a team's queues are in: its department's, or the root without one."""
    if not department_slug:
        return cohort_name(portal_name)
    return department_cohort_name(portal_name, department_slug)


def cohorts(cluster: KueueCluster, departments: Mapping[str, str]) -> list[dict]:
    """The root Cohort, then one per department of ``departments`` (slug -> its parent's slug,
    "" at the top; the departments the cluster's teams are in and their ancestors), by slug."""
    root = _cluster_object("Cohort", cohort_name(cluster.portal_name), cluster, spec={})
    return [
        root,
        *(
            _cluster_object(
                "Cohort",
                department_cohort_name(cluster.portal_name, slug),
                cluster,
                spec={"parentName": team_cohort(cluster.portal_name, departments[slug])},
            )
            for slug in sorted(departments)
        ),
    ]


def cluster_objects(
    cluster: KueueCluster, departments: Mapping[str, str] | None = None
) -> list[dict]:
    """Everything cluster-wide the portal's queues need, flavors first, the cohorts last."""
    objects = [
        *resource_flavors(cluster),
        *priority_classes(cluster),
        *cohorts(cluster, departments or {}),
    ]
    return [manifests.with_hash(obj) for obj in objects]


# --- a team's queues ---------------------------------------------------------------------------


def own_gpus(team: TeamOnCluster, cluster: KueueCluster) -> dict[tuple[str, str], int]:
    """The team's GPUs per (GPU kind, model) from its grants in effect ("" for any model).
    A grant of a model no node carries any more has no flavor to go to and is left out."""
    if team.archived:
        return {}
    models = set(cluster.gpu_models)
    gpus: dict[tuple[str, str], int] = {}
    for grant in team.grants:
        model = getattr(grant, "gpu_model", "") or ""
        if not grant_periods.in_effect(grant, team.today) or (model and model not in models):
            continue
        key = (grant.gpu_resource, model)
        gpus[key] = gpus.get(key, 0) + grant.gpus
    return gpus


def _quantity(number: int) -> str:
    return str(number)


def _weight(weight: Decimal) -> str:
    return manifests.cpu_quantity(int(Decimal(weight) * 1000))


def _gpu_group(
    team: TeamOnCluster, cluster: KueueCluster, policy: QueuePolicy, kind: str
) -> dict | None:
    if not cluster.gpu_resources:
        return None
    own = own_gpus(team, cluster) if kind == GUARANTEED else {}
    flavors = []
    for flavor, model in gpu_flavors(cluster):
        resources = []
        for resource in cluster.gpu_resources:
            nominal = own.get((resource, model), 0)
            quota = {"name": resource, "nominalQuota": _quantity(nominal)}
            if kind == GUARANTEED:
                quota["borrowingLimit"] = "0"
                if policy.lending_limit is not None:
                    quota["lendingLimit"] = _quantity(min(policy.lending_limit, nominal))
            elif policy.borrowing_limit is not None:
                quota["borrowingLimit"] = _quantity(policy.borrowing_limit)
            resources.append(quota)
        flavors.append({"name": flavor, "resources": resources})
    return {"coveredResources": list(cluster.gpu_resources), "flavors": flavors}


def _cpu_memory_group(team: TeamOnCluster, cluster: KueueCluster, kind: str) -> dict:
    if kind == GUARANTEED:
        figures = manifests.quota_figures(team)
        cpu = (
            manifests.cpu_quantity(figures.cpu_millicores)
            if figures.cpu_millicores is not None
            else _quantity(MAX_CPU_CORES)
        )
        memory = manifests.memory_quantity(
            (figures.memory_gib if figures.memory_gib is not None else MAX_MEMORY_GIB) * 1024
        )
        resources = [
            {"name": "cpu", "nominalQuota": cpu, "borrowingLimit": "0"},
            {"name": "memory", "nominalQuota": memory, "borrowingLimit": "0"},
        ]
    else:
        resources = [
            {"name": "cpu", "nominalQuota": "0"},
            {"name": "memory", "nominalQuota": "0"},
        ]
    return {
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": cpu_memory_flavor_name(cluster.portal_name), "resources": resources}],
    }


def cluster_queue(
    team: TeamOnCluster,
    cluster: KueueCluster,
    policy: QueuePolicy,
    rules: Policy,
    kind: str,
    *,
    department: str = "",
) -> dict:
    """The team's ClusterQueue for guaranteed or opportunistic work, in the cohort of its
    department (its slug; "" for none)."""
    groups = [_gpu_group(team, cluster, policy, kind), _cpu_memory_group(team, cluster, kind)]
    preemption = (
        {"reclaimWithinCohort": _reclaim(cluster), "withinClusterQueue": "LowerPriority"}
        if kind == GUARANTEED
        else {"reclaimWithinCohort": _borrowers_reclaim(cluster), "withinClusterQueue": "Never"}
    )
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {
            "name": cluster_queue_name(rules.portal_name, team.slug, kind),
            "labels": manifests.labels(team, rules),
        },
        "spec": {
            "cohortName": team_cohort(rules.portal_name, department),
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "fairSharing": {"weight": _weight(policy.weight(kind))},
            "preemption": preemption,
            "resourceGroups": [group for group in groups if group is not None],
        },
    }


def _reclaim(cluster: KueueCluster) -> str:
    """What a queue may preempt of the borrowers in its cohort: any of them, or, where borrowers
    are protected for a minimum run time, only those of lower priority than the preemptor:
    borrowers whose protected priority (as high as guaranteed work's) the portal has lowered."""
    return "LowerPriority" if cluster.protects_borrowers else "Any"


def _borrowers_reclaim(cluster: KueueCluster) -> str:
    """What an opportunistic queue may preempt in its cohort. Its workloads only ever borrow,
    and under fair sharing Kueue preempts only borrowed GPUs, from the queues whose share
    (borrowed GPUs over weight) is above the preemptor's: with ``Any`` (or ``LowerPriority``,
    see ``_reclaim``) the borrowers converge on shares in proportion to their weights; with
    ``Never`` the first to borrow keeps what it took until the lender wants it back."""
    return _reclaim(cluster) if cluster.borrowers_share_by_weight else "Never"


def local_queue(team: TeamOnCluster, rules: Policy, kind: str) -> dict:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {
            "name": kind,
            "namespace": team.namespace,
            "labels": manifests.labels(team, rules),
        },
        "spec": {"clusterQueue": cluster_queue_name(rules.portal_name, team.slug, kind)},
    }


def team_queue_objects(
    team: TeamOnCluster,
    cluster: KueueCluster,
    policy: QueuePolicy,
    rules: Policy,
    *,
    department: str = "",
) -> list[dict]:
    """The team's ClusterQueues (in its department's cohort), then its LocalQueues; none for an
    archived team."""
    if team.archived:
        return []
    objects = [
        cluster_queue(team, cluster, policy, rules, kind, department=department)
        for kind in LOCAL_QUEUES
    ]
    objects += [local_queue(team, rules, kind) for kind in LOCAL_QUEUES]
    return [manifests.with_hash(obj) for obj in objects]


def quota_ceiling(team: TeamOnCluster, cluster: KueueCluster, policy: QueuePolicy) -> dict:
    """The ResourceQuota's GPUs per kind in Kueue mode: the most the team's queues can admit.

    Its own quota (the guaranteed queue's) plus what the opportunistic queue may borrow: the
    borrowing limit on each GPU flavor, or without a limit the cluster's capacity, and never
    more than the cluster has (unless the team's own quota is more, on an overcommitted
    cluster). Lower, and the ResourceQuota would refuse the pods of Jobs Kueue admitted; higher,
    and kubectl users could go around the queues.
    """
    own = manifests.quota_figures(team).gpus
    capacity = dict(cluster.gpu_capacity)
    flavors = len(gpu_flavors(cluster))
    ceiling = {}
    for resource in cluster.gpu_resources:
        mine, total = own.get(resource, 0), capacity.get(resource, 0)
        borrowable = total if policy.borrowing_limit is None else policy.borrowing_limit * flavors
        ceiling[resource] = 0 if team.archived else max(mine, min(mine + borrowable, total))
    return ceiling
