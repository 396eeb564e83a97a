"""The benchmarks' own view of their Jobs on the devcluster: when each was created, admitted by
Kueue, seen Running and Succeeded, followed by watches of this process (Pods, Jobs, Kueue's
Workloads) rather than by the portal's watcher, so that what is measured is the cluster."""

from __future__ import annotations

import json
import sys
import threading
import time

from django.conf import settings
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from clusters.vocabulary import MANAGED_BY_LABEL


def log(message: str) -> None:
    print(f"[following {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Following:
    """This process's own view of the benchmark's Jobs: when each was created, admitted by
    Kueue, seen Running and Succeeded (wall clock), keyed by (namespace, Job name); which pods
    run now; and how many times Kueue preempted each."""

    def __init__(self, api_client, namespaces: set[str]):
        self.api = api_client
        self.namespaces = namespaces
        self.lock = threading.Lock()
        self.created: dict[tuple, float] = {}
        self.admitted: dict[tuple, float] = {}
        self.running: dict[tuple, float] = {}
        self.succeeded: dict[tuple, float] = {}
        self.running_now: set[tuple] = set()
        self.preemptions: dict[tuple, int] = {}
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._follow, args=(kind,), daemon=True)
            for kind in ("Pod", "Job", "Workload")
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _lister(self, kind: str):
        core, batch = client.CoreV1Api(self.api), client.BatchV1Api(self.api)
        objects = client.CustomObjectsApi(self.api)
        selector = f"{MANAGED_BY_LABEL}={settings.PORTAL_NAME}"
        if kind == "Pod":
            return core.list_pod_for_all_namespaces, {"label_selector": selector}
        if kind == "Job":
            return batch.list_job_for_all_namespaces, {"label_selector": selector}

        def workloads(**kwargs):
            return objects.list_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "workloads", **kwargs
            )

        return workloads, {}

    def _follow(self, kind: str) -> None:
        lister, kwargs = self._lister(kind)
        version = None
        while not self.stop.is_set():
            try:
                if version is None:
                    listed = lister(**kwargs, _preload_content=False)
                    body = json.loads(listed.data)
                    version = body["metadata"]["resourceVersion"]
                    for item in body.get("items") or []:
                        self._seen(kind, item, time.time())
                for event in watch.Watch().stream(
                    lister, resource_version=version, timeout_seconds=60, **kwargs
                ):
                    obj = event["raw_object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "DELETED":
                        self._seen(kind, obj, time.time())
                    if self.stop.is_set():
                        return
            except ApiException as error:
                if error.status == 410:
                    version = None
                time.sleep(0.5)
            except Exception as error:  # the shared API server may restart
                log(f"{kind} watch interrupted ({type(error).__name__}); resuming")
                time.sleep(1)

    def _seen(self, kind: str, obj: dict, now: float) -> None:
        metadata = obj.get("metadata") or {}
        namespace = metadata.get("namespace") or ""
        if namespace not in self.namespaces:
            return
        with self.lock:
            if kind == "Job":
                self.created.setdefault((namespace, metadata["name"]), now)
            elif kind == "Pod":
                labels = metadata.get("labels") or {}
                job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
                if not job:
                    return
                key = (namespace, job)
                phase = (obj.get("status") or {}).get("phase")
                if phase == "Running" and not metadata.get("deletionTimestamp"):
                    self.running.setdefault(key, now)
                    self.running_now.add(key)
                else:
                    self.running_now.discard(key)
                if phase == "Succeeded":
                    self.succeeded.setdefault(key, now)
            else:
                owner = next(
                    (o for o in metadata.get("ownerReferences") or [] if o.get("kind") == "Job"),
                    None,
                )
                if owner is None:
                    return
                key = (namespace, owner["name"])
                status = obj.get("status") or {}
                admitted = any(
                    c.get("type") == "Admitted" and c.get("status") == "True"
                    for c in status.get("conditions") or []
                )
                if admitted:
                    self.admitted.setdefault(key, now)
                evictions = sum(
                    e.get("count") or 0
                    for e in (status.get("schedulingStats") or {}).get("evictions") or []
                    if e.get("reason") == "Preempted"
                )
                if evictions:
                    self.preemptions[key] = max(self.preemptions.get(key, 0), evictions)
