"""The portal's view of one cluster's GPU jobs: its Jobs, their pods and the Jobs' pod-creation
events as last seen (and, on a cluster whose quota Kueue enforces, the Jobs' Kueue Workloads),
kept current from full lists and watch events, and turned into each job's observation
(``gpujobs.observe``) recorded on its row (``gpujobs.recording``).

Used by the watcher (``watch_jobs``), which feeds it watch events, and by the periodic resync,
which feeds it one full list per kind: the same code decides the state either way.

Objects are keyed by (namespace, job id): the id comes from the ``gpuportal.io/job-id`` label
(Jobs, pods) or the Job's name (events; Workloads, by their owner Job); the namespace must be the
job's team's for a write to happen, so another portal's Jobs on a shared cluster are never
mistaken for ours.

Events are anyone's to write: whoever may create an Event in a namespace can point its
``involvedObject`` anywhere. An Event counts only for the Job it is about and only from that Job's
own namespace: the Event's namespace is its involved object's, the involved object is a
``batch`` Job with a portal Job name, and, once the Job is seen, its uid is that Job's.

A Job that waits under the rules of the quota mode its cluster has left (queued in Kueue on a
cluster switched to quota only, or waiting outside Kueue on one switched to Kueue) is handed to
``cluster_jobs.job_requeue_for_mode``, which makes it again under the current mode.
"""

from __future__ import annotations

import datetime
import functools
import logging
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings

from clusters.following import keep_by_name
from clusters.vocabulary import JOB_ID_LABEL
from clusters.workloads import WorkloadClient
from gpujobs import enqueue, manifests, recording, selectors
from gpujobs.observe import Observation, observe, waits_in_the_other_mode
from workloads import queueing

logger = logging.getLogger(__name__)

Key = tuple[str, int]  # (namespace, job id)
KINDS = ("Job", "Pod", "Event")
# Followed too on a cluster whose quota Kueue enforces: each queued Job's Workload.
KUEUE_KINDS = ("Workload",)
# Clocks and the API server's snapshot are not exact: only jobs created this long before a list
# began are expected in it.
LIST_MARGIN_SECONDS = 5
# Jobs written per transaction: short enough that a stop never waits long for the row.
WRITE_BATCH = 200


def label_selector() -> str:
    return manifests.ownership_selector(settings.PORTAL_NAME)


# Only pod-creation failures of Jobs matter for a job's state (a quota refusal, say); what a pod
# waits for is in the pod's own status. Events carry no labels, so they are chosen by fields.
EVENT_FIELD_SELECTOR = "involvedObject.kind=Job,reason=FailedCreate"


def object_selectors(kind: str) -> dict:
    """The label or field selector that lists and watches the portal's objects of a kind."""
    if kind == "Event":
        return {"field_selector": EVENT_FIELD_SELECTOR}
    if kind == "Workload":
        return {}  # Kueue copies none of the Job's labels: chosen by owner (``key_of``)
    return {"label_selector": label_selector()}


def _metadata(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _event_key(event: dict) -> Key | None:
    """An Event's job: only a portal Job's, in the Event's own namespace (an Event in one
    namespace about an object in another says nothing the portal believes)."""
    involved = event.get("involvedObject") or {}
    namespace = _metadata(event).get("namespace") or ""
    group = (involved.get("apiVersion") or "").partition("/")[0]
    if involved.get("kind") != "Job" or group != "batch":
        return None
    if not namespace or involved.get("namespace") != namespace:
        return None
    job_id = manifests.job_id_from_name(involved.get("name") or "")
    return (namespace, job_id) if job_id is not None else None


def _owner_job(obj: dict) -> dict:
    for owner in _metadata(obj).get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("apiVersion", "batch/v1") == "batch/v1":
            return owner
    return {}


def key_of(kind: str, obj: dict) -> Key | None:
    metadata = _metadata(obj)
    if kind == "Workload":
        job_id = manifests.job_id_from_name(_owner_job(obj).get("name") or "")
        return (metadata.get("namespace") or "", job_id) if job_id is not None else None
    if kind == "Event":
        return _event_key(obj)
    value = (metadata.get("labels") or {}).get(JOB_ID_LABEL, "")
    if not value.isdigit():
        return None
    return metadata.get("namespace") or "", int(value)


def job_uid_of(kind: str, obj: dict) -> str:
    """The uid of the Job an object belongs to (a Job's own; a pod's controller's)."""
    metadata = _metadata(obj)
    if kind == "Job":
        return metadata.get("uid") or ""
    if kind == "Pod":
        for owner in metadata.get("ownerReferences") or []:
            if owner.get("kind") == "Job" and owner.get("controller"):
                return owner.get("uid") or ""
    if kind == "Event":
        return (obj.get("involvedObject") or {}).get("uid") or ""
    if kind == "Workload":
        return _owner_job(obj).get("uid") or ""
    return ""


def kept(kind: str, obj: dict) -> dict:
    """What the state keeps of an object: what the observations read, not the whole object.

    A watcher follows every job of a cluster for as long as it runs, so what it keeps of each
    bounds its memory. Of the metadata only ``METADATA_READ`` is kept; of a Job's spec only the
    fields ``observe`` reads (``suspend``, ``backoffLimit``, ``activeDeadlineSeconds`` and the
    containers' names and resource limits, for its GPU kind), of its status ``JOB_STATUS_READ``
    (its conditions' ``CONDITION_READ``), of a pod's spec only the node. A pod's status, and an
    Event's or a Workload's own fields, are kept whole. Strings that many objects share (kinds,
    labels, condition types and reasons, times) are kept once (``sys.intern``)."""
    metadata = {k: v for k, v in _metadata(obj).items() if k in METADATA_READ}
    if isinstance(metadata.get("labels"), dict):
        # The same few labels on every object: one copy of each string, not one an object.
        metadata["labels"] = {
            sys.intern(key): sys.intern(value) if isinstance(value, str) else value
            for key, value in metadata["labels"].items()
        }
    if isinstance(metadata.get("namespace"), str):
        metadata["namespace"] = sys.intern(metadata["namespace"])
    for time_field in ("creationTimestamp", "deletionTimestamp"):
        if isinstance(metadata.get(time_field), str):
            metadata[time_field] = sys.intern(metadata[time_field])
    trimmed = {**obj, "metadata": metadata}
    for shared in ("kind", "apiVersion"):
        if isinstance(trimmed.get(shared), str):
            trimmed[shared] = sys.intern(trimmed[shared])
    spec = obj.get("spec")
    status = obj.get("status")
    if kind == "Job" and isinstance(status, dict):
        trimmed["status"] = _job_status(status)
    if kind == "Job" and isinstance(spec, dict):
        template = (spec.get("template") or {}).get("spec") or {}
        trimmed["spec"] = {
            **{k: spec[k] for k in JOB_SPEC_READ if k in spec},
            "template": {
                "spec": {
                    "containers": [
                        {"name": _shared(c.get("name")), "resources": {"limits": _limits(c)}}
                        for c in template.get("containers") or []
                    ]
                }
            },
        }
    elif kind == "Pod" and isinstance(spec, dict):
        trimmed["spec"] = {k: spec[k] for k in ("nodeName",) if k in spec}
    return trimmed


# The metadata fields the observations and the keys read: not ``managedFields`` (the API
# server's bookkeeping of who set which field, often the largest part of an object), not
# annotations, resourceVersion or generation.
METADATA_READ = (
    "name",
    "namespace",
    "uid",
    "labels",
    "creationTimestamp",
    "deletionTimestamp",
    "ownerReferences",
)
# The Job spec fields ``gpujobs.observe`` reads (besides its containers' limits).
JOB_SPEC_READ = ("suspend", "backoffLimit", "activeDeadlineSeconds")
# The Job status fields ``gpujobs.observe`` reads, and of each of its conditions: not
# ``lastProbeTime``, ``ready``, ``terminating``, ``uncountedTerminatedPods`` and the like.
JOB_STATUS_READ = ("conditions", "completionTime", "succeeded", "failed")
CONDITION_READ = ("type", "status", "reason", "message", "lastTransitionTime")
# Strings up to this long are kept once however many objects carry them (``sys.intern``).
SHARED_STRING_MAX = 100


def _shared(value):
    """One copy of a short string that many objects carry; anything else as it is."""
    if isinstance(value, str) and len(value) <= SHARED_STRING_MAX:
        return sys.intern(value)
    return value


def _job_status(status: dict) -> dict:
    kept_status = {k: status[k] for k in JOB_STATUS_READ if k in status}
    conditions = kept_status.get("conditions")
    if isinstance(conditions, list):
        kept_status["conditions"] = [
            {k: _shared(c[k]) for k in CONDITION_READ if k in c} if isinstance(c, dict) else c
            for c in conditions
        ]
    if "completionTime" in kept_status:
        kept_status["completionTime"] = _shared(kept_status["completionTime"])
    return kept_status


def _limits(container: dict) -> dict:
    return {
        _shared(k): _shared(v)
        for k, v in ((container.get("resources") or {}).get("limits") or {}).items()
    }


@dataclass
class ClusterState:
    """What one cluster holds of the portal's jobs, keyed by (namespace, job id)."""

    jobs: dict[Key, dict] = field(default_factory=dict)
    pods: dict[Key, dict[str, dict]] = field(default_factory=lambda: defaultdict(dict))
    events: dict[Key, dict[str, dict]] = field(default_factory=lambda: defaultdict(dict))
    workloads: dict[Key, dict[str, dict]] = field(default_factory=lambda: defaultdict(dict))

    def _store(self, kind: str) -> dict:
        return {
            "Job": self.jobs,
            "Pod": self.pods,
            "Event": self.events,
            "Workload": self.workloads,
        }[kind]

    def replace(self, kind: str, items: list[dict]) -> set[Key]:
        """Everything of a kind, from a full list. Returns the keys whose objects changed or
        disappeared (all of them: a resync looks at every job again).

        Takes the items out of ``items`` as it stores them (the list is empty after), so that
        a list of many thousand objects and the state made of it are not held twice at once."""
        store = self._store(kind)
        before = set(store)
        store.clear()
        items.reverse()
        while items:
            self.apply(kind, "ADDED", items.pop())
        return before | set(store)

    def apply(self, kind: str, event_type: str, obj: dict) -> Key | None:
        key = key_of(kind, obj)
        if key is None:
            return None
        obj = kept(kind, obj)
        if kind == "Job":
            if event_type == "DELETED":
                self.jobs.pop(key, None)
                self.pods.pop(key, None)
                self.events.pop(key, None)
            else:
                self.jobs[key] = obj
        else:
            keep_by_name(self._store(kind), key, event_type, obj)
        return key

    def observation(self, key: Key) -> Observation | None:
        job = self.jobs.get(key)
        if job is None:
            return None
        uid = _metadata(job).get("uid") or ""
        pods = [p for p in self.pods.get(key, {}).values() if job_uid_of("Pod", p) in ("", uid)]
        # The job controller always names the Job's uid; an Event without it, or with another
        # Job's (an older one of the same name), is not about this Job.
        events = [
            e for e in self.events.get(key, {}).values() if not uid or job_uid_of("Event", e) == uid
        ]
        return observe(job, pods, events, self.workload(key))

    def workload(self, key: Key) -> dict | None:
        """The Job's own Workload (its owner uid is the Job's), the newest if Kueue made more."""
        uid = self.job_uid(key)
        mine = [w for w in self.workloads.get(key, {}).values() if job_uid_of("Workload", w) == uid]
        return max(mine, key=lambda w: _metadata(w).get("creationTimestamp") or "", default=None)

    def waits_in_the_other_mode(self, key: Key, *, kueue: bool) -> bool:
        job = self.jobs.get(key)
        if job is None:
            return False
        return waits_in_the_other_mode(job, list(self.pods.get(key, {}).values()), kueue=kueue)

    def job_uid(self, key: Key) -> str:
        job = self.jobs.get(key)
        return (_metadata(job).get("uid") or "") if job else ""


class Tracker:
    """A cluster's state, and writing each changed job's observation to the database.

    ``kueue`` says whether the cluster's quota is Kueue's now (None: not known, and Jobs are
    not compared with it)."""

    def __init__(self, *, cluster_id: int, cluster_name: str, kueue: bool | None = None):
        self.cluster_id = cluster_id
        self.cluster_name = cluster_name
        self.kueue = kueue
        self.state = ClusterState()
        self.writes = 0
        self.requeued: set[tuple[Key, str]] = set()  # (job, Job uid) handed over already

    def write_many(self, keys) -> int:
        """Write the observations of many jobs in one go; how many rows changed."""
        seen = []
        for key in keys:
            observation = self.state.observation(key)
            if observation is not None:
                seen.append((key[0], key[1], observation, self.state.job_uid(key)))
        changed = 0
        for start in range(0, len(seen), WRITE_BATCH):
            batch = seen[start : start + WRITE_BATCH]
            changed += recording.record_observations(cluster_id=self.cluster_id, seen=batch)
        self.writes += changed
        self.requeue_out_of_mode([(namespace, job_id) for namespace, job_id, _, _ in seen])
        return changed

    def requeue_out_of_mode(self, keys) -> list[int]:
        """Hand the jobs whose Jobs wait under the other quota mode to
        ``cluster_jobs.job_requeue_for_mode`` (once per Job: the task checks again)."""
        if self.kueue is None:
            return []
        handed = []
        for key in keys:
            uid = self.state.job_uid(key)
            if (key, uid) in self.requeued or not self.state.waits_in_the_other_mode(
                key, kueue=self.kueue
            ):
                continue
            self.requeued.add((key, uid))
            enqueue.enqueue_requeue(job_id=key[1])
            handed.append(key[1])
        return handed

    def write(self, key: Key) -> bool:
        namespace, job_id = key
        observation = self.state.observation(key)
        if observation is None:
            return False
        seen = [(namespace, job_id, observation, self.state.job_uid(key))]
        changed = recording.record_observations(cluster_id=self.cluster_id, seen=seen) == 1
        self.writes += int(changed)
        return changed

    def job_deleted(self, key: Key, uid: str) -> bool:
        namespace, job_id = key
        return recording.record_job_gone(
            job_id=job_id, cluster_id=self.cluster_id, namespace=namespace, kube_uid=uid
        )

    def missing_jobs(self, *, listed_at, kube: WorkloadClient) -> list[Key]:
        """Jobs the portal follows on this cluster, created well before a full list of Jobs
        began (so the list must hold them), that the list did not hold and that a direct read
        confirms are gone: deleted while nobody watched."""
        before = listed_at - datetime.timedelta(seconds=LIST_MARGIN_SECONDS)
        followed = selectors.followed_jobs(cluster_id=self.cluster_id, submitted_before=before)
        return [
            (namespace, job_id)
            for namespace, job_id in followed
            if (namespace, job_id) not in self.state.jobs
            and kube.get_job(namespace, manifests.job_name(job_id)) is None
        ]


def resync_cluster(cluster, *, kube: WorkloadClient | None = None) -> dict:
    """One full pass over a cluster, without a watch: list the portal's Jobs, pods and Job
    events, write every job's state, mark active jobs whose Job is gone, and delete again the
    Jobs of cancelled jobs that are still there. The periodic safety net for missed events."""
    from django.utils import timezone

    kube = kube or WorkloadClient.for_cluster(cluster)
    kueue = queueing.kueue_mode(cluster)
    tracker = Tracker(cluster_id=cluster.pk, cluster_name=cluster.name, kueue=kueue)
    started = timezone.now()
    for kind in KINDS + (KUEUE_KINDS if kueue else ()):
        keep = functools.partial(kept, kind)
        listed = kube.list_objects(kind, keep=keep, **object_selectors(kind))
        tracker.state.replace(kind, listed.items)
    changed = tracker.write_many(list(tracker.state.jobs))
    vanished = 0
    for key in tracker.missing_jobs(listed_at=started, kube=kube):
        vanished += int(tracker.job_deleted(key, ""))
    present = [
        key
        for key, job in tracker.state.jobs.items()
        if not _metadata(job).get("deletionTimestamp")
    ]
    redeleted = 0
    for job_id in selectors.cancelled_job_ids(cluster_id=cluster.pk, keys=present):
        enqueue.enqueue_delete(job_id=job_id)
        redeleted += 1
    return {
        "jobs": len(tracker.state.jobs),
        "changed": changed,
        "vanished": vanished,
        "deleted_again": redeleted,
    }
