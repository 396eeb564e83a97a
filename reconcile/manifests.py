"""What a team should have on a cluster, as the plain dicts the Kubernetes API takes.

Pure functions: no database, no network. ``reconcile.desired_state`` gathers a ``TeamOnCluster``
from the database; ``reconcile.team_pass`` applies what ``desired_objects`` returns and prunes the
rest.

Per team and cluster the portal owns:

* the Namespace (named after the team's slug), labelled for Pod Security Admission: it enforces
  the cluster's level (``baseline`` unless the cluster says ``restricted``) and warns and audits
  at ``restricted``, so no privileged, host-namespace or hostPath pod runs there whoever
  creates it;
* a ResourceQuota: for every GPU kind the cluster offers, ``requests.<resource>`` is the sum of
  the team's active grants in effect today (0 without one: a kind missing from a quota would be
  unlimited); on a cluster in Kueue mode it is the ceiling instead (``gpu_ceiling``: the most
  the team's queues can ever admit, see ``reconcile.queue_manifests.quota_ceiling``). Only the
  ``requests.`` form is written: the API server accepts ``limits.nvidia.com/gpu`` but neither
  counts nor enforces it (proved in
  tests/integration/reconcile/test_quota_resource_names.py). CPU and memory are bounded by the
  grants' figures when every grant in effect gives one; pods by a portal-wide maximum;
* a LimitRange giving containers default CPU and memory requests and limits (so they fit a quota
  that counts CPU and memory) and, where the quota bounds them, maxima;
* RoleBindings from the team's roles to the portal's own ClusterRoles (deploy/team-roles.yaml,
  named after the portal): everyone ``<portal>-viewer``, members and leads also
  ``<portal>-member``, leads also ``<portal>-lead``, for ``<cluster user prefix><username>``
  of every active user whose username can be a cluster identity (``tenants.identities``);
  the team's group ``<prefix>team:<slug>`` gets ``<portal>-viewer``. Those roles cannot write
  RBAC, mint service-account tokens or impersonate, so access in the namespace is exactly these
  bindings;
* a NetworkPolicy admitting ingress from the namespace itself and from namespaces the portal
  does not manage, so no other team's pods reach the team's (where the network plugin enforces
  NetworkPolicies);
* on a cluster in Kueue mode, its queues (``reconcile.queue_manifests``).

An archived team keeps its namespace, LimitRange and NetworkPolicy, loses every binding, and its
quota drops to zero, so nothing new starts there (what already runs is left alone).

Every object carries ``app.kubernetes.io/managed-by: <portal>`` and ``gpuportal.io/team: <slug>``,
and an annotation with a hash of what the portal set, so that a field the portal stops setting
is noticed too (``matches``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

import orjson

from clusters.vocabulary import (
    DEFAULT_PORTAL_NAME,
    DESIRED_HASH_ANNOTATION,
    EXTERNAL_SERVICES_ALLOWED,
    EXTERNAL_SERVICES_LABEL,
    MANAGED_BY_LABEL,
    POD_SECURITY_BASELINE,
    POD_SECURITY_RESTRICTED,
    TEAM_LABEL,
    TEAM_ROLE_LEAD,
    TEAM_ROLE_MEMBER,
    TEAM_ROLE_VIEWER,
    network_policy_name,
    pod_security_label,
    team_cluster_role_name,
)
from tenants import grant_periods
from tenants.identities import is_cluster_identity, user_identity

RBAC_GROUP = "rbac.authorization.k8s.io"

# Team role -> the portal's ClusterRoles (deploy/team-roles.yaml) its members get in the team's
# namespace. Each role adds to the one below: the viewer's reads, the member's work, the lead's
# few extras.
ROLE_CLUSTER_ROLES = {
    "lead": (TEAM_ROLE_VIEWER, TEAM_ROLE_MEMBER, TEAM_ROLE_LEAD),
    "member": (TEAM_ROLE_VIEWER, TEAM_ROLE_MEMBER),
    "viewer": (TEAM_ROLE_VIEWER,),
}
# The ClusterRoles in the order their bindings are made; the team's group gets the viewer's.
CLUSTER_ROLES = (TEAM_ROLE_LEAD, TEAM_ROLE_MEMBER, TEAM_ROLE_VIEWER)
GROUP_CLUSTER_ROLE = TEAM_ROLE_VIEWER


@dataclass(frozen=True)
class Member:
    username: str
    role: str  # lead / member / viewer


@dataclass(frozen=True)
class Grant:
    """The figures of one grant that reach the cluster (a QuotaGrant row fits this shape too)."""

    gpu_resource: str
    gpus: int
    starts_on: datetime.date
    ends_on: datetime.date | None = None
    cpu_cores: Decimal | None = None
    memory_gib: int | None = None
    state: str = "active"
    gpu_model: str = ""  # empty: any model


@dataclass(frozen=True)
class Policy:
    """Portal-wide figures (from settings) that are not part of any grant."""

    portal_name: str = DEFAULT_PORTAL_NAME
    max_pods: int = 100
    default_cpu_request_millicores: int = 100
    default_cpu_limit_millicores: int = 1000
    default_memory_request_mib: int = 256
    default_memory_limit_mib: int = 1024


@dataclass(frozen=True)
class TeamOnCluster:
    """Everything the desired objects depend on: the database's state, read at one moment."""

    slug: str
    today: datetime.date
    gpu_resources: tuple[str, ...] = ()  # GPU kinds the cluster offers
    grants: tuple = ()  # Grant-shaped objects
    members: tuple[Member, ...] = ()
    user_prefix: str = ""
    archived: bool = False
    # Kueue mode: the ResourceQuota's GPUs per kind, which the team's queues may fill by
    # borrowing (None: quota only mode, the grants' sum).
    gpu_ceiling: tuple[tuple[str, int], ...] | None = None
    # The Pod Security Standard the namespace enforces (the cluster's).
    pod_security_level: str = POD_SECURITY_BASELINE
    # An admin let the team expose Services outside the cluster (the namespace says so).
    external_services: bool = False
    # What the ResourceQuota caps besides GPUs, CPU and memory (resource, amount), the cluster's
    # caps with the team's own over them; pods default to the policy's.
    object_limits: tuple[tuple[str, str], ...] = ()

    @property
    def namespace(self) -> str:
        return self.slug


@dataclass(frozen=True)
class QuotaFigures:
    """The sums the ResourceQuota and LimitRange are made of."""

    gpus: dict[str, int] = field(default_factory=dict)
    cpu_millicores: int | None = None  # None: not bounded
    memory_gib: int | None = None


# --- quantities --------------------------------------------------------------------------------


def cpu_quantity(millicores: int) -> str:
    """The API server's canonical form: whole cores as "8", the rest as "1500m"."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def memory_quantity(mib: int) -> str:
    """The API server's canonical form: "64Gi" when whole GiB, else "256Mi"."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


_SUFFIXES = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def parse_quantity(value: str) -> Decimal | None:
    """A Kubernetes quantity ("1500m", "64Gi", "4", "1e3") as a number; None if it is not one."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number, factor = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        number, factor = text, 1
    if not number or not (number[0].isdigit() or number[0] in "+-."):
        return None
    try:
        return Decimal(number) * factor
    except ArithmeticError:  # InvalidOperation, or Overflow: "1e9999999" is past any Decimal
        return None


# --- what the grants add up to -----------------------------------------------------------------


def quota_figures(team: TeamOnCluster) -> QuotaFigures:
    """GPUs per kind (every kind the cluster offers, 0 without a grant) and the CPU and memory
    bounds: the sum of the grants' figures, or unbounded when any grant in effect leaves it open.
    """
    grants = (
        [] if team.archived else [g for g in team.grants if grant_periods.in_effect(g, team.today)]
    )
    gpus = {name: 0 for name in team.gpu_resources}
    for grant in grants:
        gpus[grant.gpu_resource] = gpus.get(grant.gpu_resource, 0) + grant.gpus
    cpu = memory = None
    if grants and all(g.cpu_cores is not None for g in grants):
        cpu = int(sum(Decimal(g.cpu_cores) for g in grants) * 1000)
    if grants and all(g.memory_gib is not None for g in grants):
        memory = sum(g.memory_gib for g in grants)
    return QuotaFigures(gpus=gpus, cpu_millicores=cpu, memory_gib=memory)


# --- objects -----------------------------------------------------------------------------------


def labels(team: TeamOnCluster, policy: Policy) -> dict[str, str]:
    return {MANAGED_BY_LABEL: policy.portal_name, TEAM_LABEL: team.slug}


def ownership_selector(slug: str, policy: Policy) -> str:
    """The label selector that finds what the portal made for this team."""
    return f"{MANAGED_BY_LABEL}={policy.portal_name},{TEAM_LABEL}={slug}"


def _metadata(team: TeamOnCluster, policy: Policy, name: str, namespaced: bool = True) -> dict:
    metadata = {"name": name, "labels": labels(team, policy)}
    if namespaced:
        metadata["namespace"] = team.namespace
    return metadata


def pod_security_labels(level: str) -> dict[str, str]:
    """Pod Security Admission's labels: enforce ``level``, warn and audit at restricted (so
    members see what restricted would refuse before a cluster moves to it)."""
    labels = {}
    for mode, mode_level in (
        ("enforce", level),
        ("warn", POD_SECURITY_RESTRICTED),
        ("audit", POD_SECURITY_RESTRICTED),
    ):
        labels[pod_security_label(mode)] = mode_level
        labels[pod_security_label(f"{mode}-version")] = "latest"
    return labels


def namespace(team: TeamOnCluster, policy: Policy) -> dict:
    metadata = _metadata(team, policy, team.namespace, namespaced=False)
    metadata["labels"].update(pod_security_labels(team.pod_security_level))
    if team.external_services:
        metadata["labels"][EXTERNAL_SERVICES_LABEL] = EXTERNAL_SERVICES_ALLOWED
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def resource_quota(team: TeamOnCluster, policy: Policy) -> dict:
    figures = quota_figures(team)
    gpus_by_kind = dict(figures.gpus)
    if team.gpu_ceiling is not None and not team.archived:
        gpus_by_kind.update(team.gpu_ceiling)
    hard = {f"requests.{name}": str(gpus) for name, gpus in sorted(gpus_by_kind.items())}
    hard["pods"] = str(policy.max_pods)
    hard.update(dict(team.object_limits))
    if team.archived:
        hard["pods"] = "0"
        hard["requests.cpu"] = hard["requests.memory"] = "0"
    if figures.cpu_millicores is not None:
        hard["requests.cpu"] = cpu_quantity(figures.cpu_millicores)
    if figures.memory_gib is not None:
        hard["requests.memory"] = memory_quantity(figures.memory_gib * 1024)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _metadata(team, policy, f"{policy.portal_name}-quota"),
        "spec": {"hard": hard},
    }


def limit_range(team: TeamOnCluster, policy: Policy) -> dict:
    """Container defaults, never above what the quota allows, and maxima where it bounds."""
    figures = quota_figures(team)
    cpu_limit, cpu_request = (
        policy.default_cpu_limit_millicores,
        policy.default_cpu_request_millicores,
    )
    memory_limit, memory_request = (
        policy.default_memory_limit_mib,
        policy.default_memory_request_mib,
    )
    maximum = {}
    if figures.cpu_millicores is not None:
        cpu_limit = min(cpu_limit, figures.cpu_millicores)
        maximum["cpu"] = cpu_quantity(figures.cpu_millicores)
    if figures.memory_gib is not None:
        memory_limit = min(memory_limit, figures.memory_gib * 1024)
        maximum["memory"] = memory_quantity(figures.memory_gib * 1024)
    item = {
        "type": "Container",
        "default": {"cpu": cpu_quantity(cpu_limit), "memory": memory_quantity(memory_limit)},
        "defaultRequest": {
            "cpu": cpu_quantity(min(cpu_request, cpu_limit)),
            "memory": memory_quantity(min(memory_request, memory_limit)),
        },
    }
    if maximum:
        item["max"] = maximum
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _metadata(team, policy, f"{policy.portal_name}-defaults"),
        "spec": {"limits": [item]},
    }


def user_subject(username: str, user_prefix: str) -> dict:
    return {"apiGroup": RBAC_GROUP, "kind": "User", "name": user_identity(username, user_prefix)}


def team_group(team: TeamOnCluster) -> str:
    return f"{team.user_prefix}team:{team.slug}"


def role_bindings(team: TeamOnCluster, policy: Policy) -> list[dict]:
    """One RoleBinding per portal ClusterRole that has anyone to bind; none for an archived
    team. A username that cannot be a cluster identity is never bound (the services refuse
    it; this holds whatever the database says)."""
    if team.archived:
        return []
    bindings = []
    for cluster_role in CLUSTER_ROLES:
        names = {
            m.username
            for m in team.members
            if cluster_role in ROLE_CLUSTER_ROLES.get(m.role, ())
            and is_cluster_identity(m.username)
        }
        subjects = [user_subject(name, team.user_prefix) for name in sorted(names)]
        if cluster_role == GROUP_CLUSTER_ROLE:
            subjects.append({"apiGroup": RBAC_GROUP, "kind": "Group", "name": team_group(team)})
        if not subjects:
            continue
        name = team_cluster_role_name(policy.portal_name, cluster_role)
        bindings.append(
            {
                "apiVersion": f"{RBAC_GROUP}/v1",
                "kind": "RoleBinding",
                "metadata": _metadata(team, policy, name),
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
                "subjects": subjects,
            }
        )
    return bindings


def network_policy(team: TeamOnCluster, policy: Policy) -> dict:
    """Ingress to the team's pods only from its own namespace and from namespaces the portal
    does not manage (ingress controllers, monitoring): never from another team's. Egress is
    left open."""
    other_teams = {"key": MANAGED_BY_LABEL, "operator": "NotIn", "values": [policy.portal_name]}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(team, policy, network_policy_name(policy.portal_name)),
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {}},
                        {"namespaceSelector": {"matchExpressions": [other_teams]}},
                    ]
                }
            ],
        },
    }


def content_hash(obj: dict) -> str:
    """A short hash of what the portal sets on the object (its annotation left out)."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def with_hash(obj: dict) -> dict:
    stamped = orjson.loads(orjson.dumps(obj))  # a deep copy, several times faster than json's
    stamped["metadata"].setdefault("annotations", {})[DESIRED_HASH_ANNOTATION] = content_hash(obj)
    return stamped


def desired_objects(team: TeamOnCluster, policy: Policy) -> list[dict]:
    """Everything the team should have on the cluster, Namespace first."""
    objects = [
        namespace(team, policy),
        resource_quota(team, policy),
        limit_range(team, policy),
        network_policy(team, policy),
        *role_bindings(team, policy),
    ]
    return [with_hash(obj) for obj in objects]


# --- comparing with the cluster ----------------------------------------------------------------


def object_key(obj: dict) -> tuple[str, str, str]:
    metadata = obj["metadata"]
    return obj["kind"], metadata.get("namespace") or "", metadata["name"]


def is_owned(obj: dict, *, slug: str, policy: Policy) -> bool:
    found = (obj.get("metadata") or {}).get("labels") or {}
    return found.get(MANAGED_BY_LABEL) == policy.portal_name and found.get(TEAM_LABEL) == slug


def matches(desired, live, *, quantities: bool = True) -> bool:
    """True when ``live`` holds everything ``desired`` sets: every key of a dict (others may
    add more: labels, defaults, status), lists item by item, quantities by value ("1" equals
    "1000m"). The hash annotation makes a field the portal no longer sets count as a change.

    Labels and annotations (anything under a ``metadata``) are text, never quantities: a hash
    such as "4711e90230583318" reads as one.
    """
    # Loops rather than all() over generators, and a subtree equal as it stands (most are:
    # labels, rules, subjects) compared at C speed before walking it: an unchanged sweep
    # compares every object of every team (``reconcile.sweep.holds``).
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        for key, value in desired.items():
            if key not in live:
                return False
            found = live[key]
            if value != found and not matches(
                value, found, quantities=quantities and key != "metadata"
            ):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return False
        for wanted, found in zip(desired, live, strict=True):
            if wanted != found and not matches(wanted, found, quantities=quantities):
                return False
        return True
    if desired == live:
        return True
    if quantities and isinstance(desired, str) and isinstance(live, str):
        want, have = parse_quantity(desired), parse_quantity(live)
        return want is not None and want == have
    return False


def team_on_cluster(
    *,
    slug: str,
    today: datetime.date,
    gpu_resources: Iterable[str] = (),
    grants: Iterable = (),
    members: Iterable[Member] = (),
    user_prefix: str = "",
    archived: bool = False,
    gpu_ceiling: dict[str, int] | None = None,
    pod_security_level: str = POD_SECURITY_BASELINE,
    external_services: bool = False,
    object_limits: dict[str, str] | None = None,
) -> TeamOnCluster:
    """A ``TeamOnCluster`` from any iterables (sorted, so equal inputs build equal objects)."""
    return TeamOnCluster(
        slug=slug,
        today=today,
        gpu_resources=tuple(sorted(set(gpu_resources))),
        grants=tuple(grants),
        members=tuple(sorted(members, key=lambda m: (m.role, m.username))),
        user_prefix=user_prefix,
        archived=archived,
        gpu_ceiling=None if gpu_ceiling is None else tuple(sorted(gpu_ceiling.items())),
        pod_security_level=pod_security_level,
        external_services=external_services,
        object_limits=tuple(sorted((object_limits or {}).items())),
    )
