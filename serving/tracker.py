"""The portal's view of one cluster's inference services: their Deployments, ReplicaSets and
pods as last seen, kept current from full lists and watch events, and turned into each
revision's observation (``serving.observe``) recorded on its row (``serving.recording``).

The second kind of tracked object beside ``gpujobs.tracker``'s jobs, built the same way: the
watcher (``serving.watcher``) feeds it watch events, the periodic resync one full list per kind,
and the same code decides the state either way.

Objects are keyed by (namespace, service id, revision number), from the ``gpuportal.io/
service-id`` and ``gpuportal.io/revision`` labels every object and pod of a revision carries;
``recording`` writes a key only for a revision of that service whose team's namespace it is.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings

from clusters.following import keep_by_name
from clusters.vocabulary import REVISION_LABEL, SERVICE_ID_LABEL
from clusters.workloads import WorkloadClient
from serving import manifests, recording, selectors
from serving.observe import RevisionObservation, observe_revision

Key = recording.Key
KINDS = ("Deployment", "ReplicaSet", "Pod")
WRITE_BATCH = 200


def object_selectors(kind: str) -> dict:
    """Every kind is chosen by the portal's service labels."""
    return {"label_selector": manifests.every_service_selector(settings.PORTAL_NAME)}


def _metadata(obj: dict) -> dict:
    return obj.get("metadata") or {}


def key_of(obj: dict) -> Key | None:
    labels = _metadata(obj).get("labels") or {}
    service_id, number = labels.get(SERVICE_ID_LABEL, ""), labels.get(REVISION_LABEL, "")
    if not (service_id.isdigit() and number.isdigit()):
        return None  # a service's own Service or HTTPRoute: no revision of it
    return _metadata(obj).get("namespace") or "", int(service_id), int(number)


@dataclass
class ClusterState:
    """What one cluster holds of the portal's services, keyed by revision."""

    deployments: dict[Key, dict] = field(default_factory=dict)
    replica_sets: dict[Key, dict[str, dict]] = field(default_factory=lambda: defaultdict(dict))
    pods: dict[Key, dict[str, dict]] = field(default_factory=lambda: defaultdict(dict))

    def replace(self, kind: str, items: list[dict]) -> set[Key]:
        """Everything of a kind from a full list; the keys that changed or disappeared."""
        store = self._store(kind)
        before = set(store)
        store.clear()
        for item in items:
            self.apply(kind, "ADDED", item)
        return before | set(store)

    def _store(self, kind: str) -> dict:
        return {"Deployment": self.deployments, "ReplicaSet": self.replica_sets, "Pod": self.pods}[
            kind
        ]

    def apply(self, kind: str, event_type: str, obj: dict) -> Key | None:
        key = key_of(obj)
        if key is None:
            return None
        if kind == "Deployment":
            if event_type == "DELETED":
                self.deployments.pop(key, None)
            else:
                self.deployments[key] = obj
            return key
        keep_by_name(self._store(kind), key, event_type, obj)
        return key

    def keys(self) -> set[Key]:
        return set(self.deployments) | set(self.replica_sets) | set(self.pods)

    def observation(self, key: Key) -> RevisionObservation:
        return observe_revision(
            self.deployments.get(key),
            list(self.replica_sets.get(key, {}).values()),
            list(self.pods.get(key, {}).values()),
        )


class Tracker:
    """A cluster's services as last seen, and writing each changed revision to the database."""

    def __init__(self, *, cluster_id: int, cluster_name: str):
        self.cluster_id = cluster_id
        self.cluster_name = cluster_name
        self.state = ClusterState()
        self.writes = 0

    def write_many(self, keys) -> int:
        seen = [(key, self.state.observation(key)) for key in keys]
        changed = 0
        for start in range(0, len(seen), WRITE_BATCH):
            batch = seen[start : start + WRITE_BATCH]
            changed += recording.record_observations(cluster_id=self.cluster_id, seen=batch)
        self.writes += changed
        return changed

    def write_all(self) -> int:
        """Every revision the portal follows on the cluster and every one seen: a revision whose
        objects a full list no longer holds is recorded as gone from the cluster."""
        followed = set(selectors.followed_revisions(cluster_id=self.cluster_id))
        return self.write_many(sorted(followed | self.state.keys()))


def resync_cluster(cluster, *, kube: WorkloadClient | None = None) -> dict:
    """One full pass over a cluster, without a watch: list the services' Deployments,
    ReplicaSets and pods and write every revision's state."""
    kube = kube or WorkloadClient.for_cluster(cluster)
    tracker = Tracker(cluster_id=cluster.pk, cluster_name=cluster.name)
    for kind in KINDS:
        tracker.state.replace(kind, kube.list_objects(kind, **object_selectors(kind)).items)
    changed = tracker.write_all()
    return {"revisions": len(tracker.state.deployments), "changed": changed}
