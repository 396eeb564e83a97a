"""Make one cluster hold what a team should have there (``reconcile.desired_state``), touching
only what the portal owns, or delete the team's namespace.

``sync`` reads what the cluster holds under the portal's labels (one GET of the namespace, a GET
by name of each kind the team has one object of, a labelled LIST of the others), applies only
what differs (server-side apply, one field manager) and deletes what the portal owns but no
longer wants. An object of a wanted name that someone else made is left alone, and the pass
says so.
"""

from __future__ import annotations

from clusters.kube import KINDS, Conflict, KubeClient, KubeError, NotFound, NotOwned, describe
from reconcile import manifests
from reconcile.namespaces import NamespaceNotOwned, check_namespace_owned
from reconcile.passes import Outcome, each

NAMESPACED_KINDS = ("ResourceQuota", "LimitRange", "NetworkPolicy", "RoleBinding")
# A team's Kueue objects: its LocalQueues in the namespace, its ClusterQueues cluster-wide.
QUEUE_NAMESPACED_KINDS = ("LocalQueue",)
QUEUE_CLUSTER_KINDS = ("ClusterQueue",)
QUEUE_KINDS = (*QUEUE_CLUSTER_KINDS, *QUEUE_NAMESPACED_KINDS)
# Kinds a team has exactly one object of: read by name rather than listed.
SINGLE_OBJECT_KINDS = ("ResourceQuota", "LimitRange", "NetworkPolicy")


def list_queue_kind(
    kube: KubeClient, kind: str, *, namespace: str | None = None, label_selector: str | None
) -> list[dict] | None:
    """The Kueue objects of a kind that match the selector; None when the cluster does not
    serve the kind (Kueue is not installed)."""
    try:
        return kube.list(kind, namespace=namespace, label_selector=label_selector)
    except NotFound:
        return None


def being_deleted(kube: KubeClient, live: dict | None) -> KubeError | None:
    """A Kueue object the portal wants that is still being deleted (a ClusterQueue waits for
    the workloads it admitted, a flavor for the queues that use it): applying it would not stop
    that, so the pass is retried until it is gone and can be made again."""
    if live is None or not (live.get("metadata") or {}).get("deletionTimestamp"):
        return None
    kind, namespace, name = manifests.object_key(live)
    return Conflict(
        f"{describe(kind, name, namespace or None)} on cluster {kube.cluster_name} is being "
        "deleted (Kueue keeps it while it is in use); the portal makes it again once it is "
        "gone, and tries until then."
    )


def kueue_missing(kube: KubeClient, kind: str) -> KubeError:
    return KubeError(
        f"Kueue is not installed on cluster {kube.cluster_name}: it does not serve "
        f"{KINDS[kind].api_version} {KINDS[kind].plural}. Install Kueue v0.17 or later there, or "
        "switch the cluster back to quota only."
    )


def sync(
    kube: KubeClient,
    desired: list[dict],
    *,
    slug: str,
    rules: manifests.Policy,
    queues: bool = False,
) -> Outcome:
    """Make the cluster hold ``desired`` for the team, touching only objects the portal owns.

    With ``queues`` the team's Kueue objects are read as well (and pruned unless desired).
    Raises ``NotOwned`` when the namespace (``NamespaceNotOwned``), or an object the portal would
    create, already exists without the portal's labels: someone else made it, and it is left
    alone.
    """
    outcome = Outcome()
    wants_queues = any(obj["kind"] in QUEUE_KINDS for obj in desired)
    namespace = slug
    live_namespace = check_namespace_owned(kube, slug=slug, rules=rules)
    live: dict[tuple, dict] = {}  # the portal's objects for the team, by (kind, namespace, name)
    foreign: dict[tuple, dict] = {}  # objects with a name the portal wants, made by someone else
    read_by_name: set[tuple] = set()
    if live_namespace is not None:
        live[manifests.object_key(live_namespace)] = live_namespace
        # A namespace that does not exist yet holds nothing: only an existing one is read.
        # A kind the team has one object of is read by name: a GET costs the API server less
        # than a LIST, and finds an object of that name whoever made it. Kinds whose objects
        # come and go (RoleBindings) are listed by the portal's labels, to find what to prune.
        selector = manifests.ownership_selector(slug, rules)
        names: dict[str, list[str]] = {}
        for obj in desired:
            names.setdefault(obj["kind"], []).append(obj["metadata"]["name"])

        def read(kind: str) -> list[dict]:
            if kind in SINGLE_OBJECT_KINDS and len(names.get(kind, [])) == 1:
                found = kube.get(kind, names[kind][0], namespace)
                read_by_name.add((kind, namespace, names[kind][0]))
                return [found] if found is not None else []
            if kind in QUEUE_KINDS:
                found = list_queue_kind(kube, kind, namespace=namespace, label_selector=selector)
                if found is None and wants_queues:
                    raise kueue_missing(kube, kind)
                return found or []
            return kube.list(kind, namespace=namespace, label_selector=selector)

        kinds = [*NAMESPACED_KINDS, *(QUEUE_NAMESPACED_KINDS if queues else ())]
        for items in each(read, kinds):
            for obj in items:
                owned = manifests.is_owned(obj, slug=slug, policy=rules)
                (live if owned else foreign)[manifests.object_key(obj)] = obj
    if queues:
        # The team's ClusterQueues are cluster-wide: they may be there whether or not the
        # namespace is.
        for kind in QUEUE_CLUSTER_KINDS:
            found = list_queue_kind(
                kube, kind, label_selector=manifests.ownership_selector(slug, rules)
            )
            if found is None and wants_queues:
                raise kueue_missing(kube, kind)
            for obj in found or []:
                live[manifests.object_key(obj)] = obj

    def ensure(obj: dict) -> str | None:
        """Apply the object unless the cluster already holds it; what was applied, if anything."""
        key = manifests.object_key(obj)
        kind, obj_namespace, name = key
        current = live.get(key)
        may_exist = live_namespace is not None or not KINDS[kind].namespaced
        unread = kind != "Namespace" and may_exist and key not in read_by_name
        if current is None and unread:
            # Not among the portal's listed objects: make sure nobody else's has the name.
            found = kube.get(kind, name, obj_namespace)
            if found is not None and manifests.is_owned(found, slug=slug, policy=rules):
                current = found
            elif found is not None:
                foreign[key] = found
        if kind in QUEUE_KINDS and (terminating := being_deleted(kube, current)):
            raise terminating
        if current is not None and manifests.matches(obj, current):
            return None
        if key in foreign:
            raise NotOwned(
                f"{describe(kind, name, obj_namespace)} on cluster {kube.cluster_name} was "
                "not created by the portal, so the portal leaves it alone. A cluster admin "
                f"must delete it before the portal can manage the team's {kind} there."
            )
        try:
            kube.apply(obj)
        except NotFound as error:
            if kind in QUEUE_KINDS and error.details.get("kind") != "namespaces":
                raise kueue_missing(kube, kind) from error
            raise
        return describe(kind, name, obj_namespace or None)

    # The namespace first: what goes inside needs it.
    namespaces = [obj for obj in desired if obj["kind"] == "Namespace"]
    inside = [obj for obj in desired if obj["kind"] != "Namespace"]
    applied = [ensure(obj) for obj in namespaces] + each(ensure, inside)
    outcome.applied = [what for what in applied if what]

    wanted = {manifests.object_key(obj) for obj in desired}
    unwanted = [
        obj
        for key, obj in live.items()
        if key not in wanted
        and key[0] != "Namespace"
        and not obj["metadata"].get("deletionTimestamp")
    ]

    def prune(obj: dict) -> str:
        kind, obj_namespace, name = manifests.object_key(obj)
        kube.delete(kind, name, obj_namespace, uid=obj["metadata"].get("uid"))
        return describe(kind, name, obj_namespace)

    outcome.deleted = each(prune, unwanted)
    for obj in desired:
        if obj["kind"] == "ResourceQuota":
            outcome.quota = dict(obj["spec"]["hard"])
    if queues:
        outcome.queues = wants_queues
    return outcome


def prune_cluster_queues(kube: KubeClient, *, slug: str, rules: manifests.Policy) -> list[str]:
    """Delete the team's ClusterQueues (they are not in its namespace, so deleting that does
    not remove them); what was deleted."""
    deleted = []
    for kind in QUEUE_CLUSTER_KINDS:
        selector = manifests.ownership_selector(slug, rules)
        for obj in list_queue_kind(kube, kind, label_selector=selector) or []:
            _, _, name = manifests.object_key(obj)
            if kube.delete(kind, name, uid=obj["metadata"].get("uid")):
                deleted.append(describe(kind, name))
    return deleted


def delete_namespace(kube: KubeClient, *, slug: str, rules: manifests.Policy) -> Outcome:
    """Delete the team's namespace, and everything in it, if the portal created it, and the
    team's ClusterQueues."""
    outcome = Outcome(namespace_deleted=True, queues=False)
    outcome.deleted = prune_cluster_queues(kube, slug=slug, rules=rules)
    live = kube.get("Namespace", slug)
    if live is None:
        return outcome
    if not manifests.is_owned(live, slug=slug, policy=rules):
        raise NamespaceNotOwned(
            f"Namespace {slug} on cluster {kube.cluster_name} was not created by the portal; "
            "it is not deleted."
        )
    if live.get("metadata", {}).get("deletionTimestamp"):
        return outcome  # already going
    kube.delete("Namespace", slug, uid=live["metadata"].get("uid"))
    outcome.deleted.append(describe("Namespace", slug))
    return outcome
