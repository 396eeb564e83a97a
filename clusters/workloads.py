"""Workloads on a cluster: create and delete Jobs, read pod logs, list and watch Jobs, Pods,
Events, Deployments and ReplicaSets from a resourceVersion, and read Kueue's view of them (its
Workloads, ClusterQueues and ResourceFlavors, and the pending workloads of its visibility API).
The workload apps' only way to the cluster (the job app's, and the serving app's besides
``KubeClient.apply``).

``WorkloadClient`` is a ``KubeClient`` (same connection per cluster, same field manager, same
request counters and the same readable ``KubeError``s), with the calls that Jobs need on top.
Objects go in and come out as plain dicts (the API's JSON).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx
import orjson
from kubernetes.client import Configuration
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines
from urllib3.exceptions import HTTPError

from clusters.kube import (
    REQUEST_TIMEOUT,
    AlreadyExists,
    ClusterUnreachable,
    Conflict,
    Invalid,
    Kind,
    KubeClient,
    KubeError,
    NotFound,
    ResourceVersionExpired,
    describe,
)
from clusters.vocabulary import KUEUE_API_VERSION

JOBS = Kind("batch/v1", "jobs", namespaced=True)
PODS = Kind("v1", "pods", namespaced=True)
EVENTS = Kind("v1", "events", namespaced=True)
# Kueue's: one Workload per queued Job (owned by it), the queues and the flavors they use.
WORKLOADS = Kind(KUEUE_API_VERSION, "workloads", namespaced=True)
CLUSTER_QUEUES = Kind(KUEUE_API_VERSION, "clusterqueues", namespaced=False)
RESOURCE_FLAVORS = Kind(KUEUE_API_VERSION, "resourceflavors", namespaced=False)
# An inference service's: a Deployment per revision, and the ReplicaSets that make its pods.
DEPLOYMENTS = Kind("apps/v1", "deployments", namespaced=True)
REPLICA_SETS = Kind("apps/v1", "replicasets", namespaced=True)
WORKLOAD_KINDS = {
    "Job": JOBS,
    "Pod": PODS,
    "Event": EVENTS,
    "Workload": WORKLOADS,
    "ClusterQueue": CLUSTER_QUEUES,
    "ResourceFlavor": RESOURCE_FLAVORS,
    "Deployment": DEPLOYMENTS,
    "ReplicaSet": REPLICA_SETS,
}
# Kueue's visibility API (an aggregated API served by Kueue itself): a ClusterQueue's pending
# workloads in the order Kueue will admit them.
VISIBILITY_API = "/apis/visibility.kueue.x-k8s.io/v1beta2"

LIST_PAGE_SIZE = 500
# A watch ends after this many seconds (the API server closes it); the caller simply resumes.
WATCH_TIMEOUT_SECONDS = 240
# Reading a followed log: how long one read may wait for the next bytes.
FOLLOW_READ_TIMEOUT = 60


@dataclass
class Listing:
    """Every object of a kind (matching the selectors) and the resourceVersion of that list,
    from which a watch continues without missing a change."""

    items: list[dict] = field(default_factory=list)
    resource_version: str = ""


@dataclass(frozen=True)
class WatchEvent:
    """``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK`` and the object as it is now."""

    type: str
    object: dict

    @property
    def resource_version(self) -> str:
        return (self.object.get("metadata") or {}).get("resourceVersion") or ""


def _ssl_context(configuration: Configuration) -> ssl.SSLContext:
    """TLS for a request of our own as the kubernetes client would make it: the kubeconfig's
    CA (or the system's), its client certificate, and its choice about verifying."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


class WorkloadClient(KubeClient):
    """A cluster's Jobs, Pods and Events, and its pods' logs."""

    # -- Jobs

    def create_job(self, manifest: dict) -> tuple[dict, bool]:
        """Create the Job; when one of that name exists already, return it instead.

        Returns ``(job, created)``. Creating twice is safe: the name comes from the portal's id,
        so the second call finds the first call's Job (check its labels before trusting it).
        A quota refusal raises ``QuotaExceeded``; a namespace that does not exist, ``NotFound``.
        """
        metadata = manifest["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        what = describe("Job", name, namespace)
        try:
            created = self._call(
                "POST",
                JOBS.path(namespace=namespace),
                what=what,
                query=[("fieldManager", self.field_manager)],
                body=manifest,
                content_type="application/json",
            )
        except AlreadyExists:
            existing = self.get_job(namespace, name)
            if existing is None:
                raise
            return existing, False
        return created, True

    def get_job(self, namespace: str, name: str) -> dict | None:
        try:
            return self._call(
                "GET",
                JOBS.path(namespace=namespace, name=name),
                what=describe("Job", name, namespace),
            )
        except NotFound:
            return None

    def delete_job(
        self,
        namespace: str,
        name: str,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete the Job and its pods. ``Foreground`` keeps the Job (with a deletion
        timestamp) until its pods are gone; ``Background`` removes the Job at once and lets the
        garbage collector remove the pods. With ``uid``, only that very Job. False when it was
        already gone."""
        if propagation not in ("Foreground", "Background"):
            raise ValueError(f"unknown propagation policy {propagation!r}")
        body: dict = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._call(
                "DELETE",
                JOBS.path(namespace=namespace, name=name),
                what=describe("Job", name, namespace),
                body=body,
                content_type="application/json",
            )
        except NotFound:
            return False
        except Conflict as error:
            # A uid precondition that fails: the Job of that name is another one now.
            if uid and error.status == 409:
                return False
            raise
        return True

    def relabel_job(self, namespace: str, name: str, *, key: str, old: str, new: str) -> bool:
        """Change the Job's label ``key`` from ``old`` to ``new``, only if it still has ``old``
        (a JSON Patch whose test fails changes nothing); False when the Job is gone or its
        label is no longer ``old``."""
        path = "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")
        try:
            self._call(
                "PATCH",
                JOBS.path(namespace=namespace, name=name),
                what=describe("Job", name, namespace),
                query=[("fieldManager", self.field_manager)],
                body=[
                    {"op": "test", "path": path, "value": old},
                    {"op": "replace", "path": path, "value": new},
                ],
                content_type="application/json-patch+json",
            )
        except NotFound:
            return False
        except Invalid as error:
            if error.status == 422:  # the test failed: someone else changed it first
                return False
            raise
        return True

    # -- Pods (monitoring: stopping an idle pod the portal created)

    def get_pod(self, namespace: str, name: str) -> dict | None:
        try:
            return self._call(
                "GET",
                PODS.path(namespace=namespace, name=name),
                what=describe("Pod", name, namespace),
            )
        except NotFound:
            return None

    def delete_pod(self, namespace: str, name: str, *, uid: str | None = None) -> bool:
        """Delete the pod (with ``uid``, only that very pod). False when it was already gone."""
        body: dict = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._call(
                "DELETE",
                PODS.path(namespace=namespace, name=name),
                what=describe("Pod", name, namespace),
                body=body,
                content_type="application/json",
            )
        except NotFound:
            return False
        except Conflict as error:
            if uid and error.status == 409:  # that very pod is gone; another has its name
                return False
            raise
        return True

    # -- lists and watches

    def list_objects(
        self,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        keep: Callable[[dict], dict] | None = None,
    ) -> Listing:
        """Every matching object, page by page, and the list's resourceVersion. With ``keep``,
        what it returns of each object instead, taken as each page arrives: a long list never
        holds more than a page of whole objects."""
        resource = WORKLOAD_KINDS[kind]
        path = resource.path(namespace=namespace)
        what = f"the {resource.plural}" + (f" in namespace {namespace}" if namespace else "")
        listing = Listing()
        token = None
        while True:
            query = [("limit", str(LIST_PAGE_SIZE))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            body = self._call("GET", path, what=what, query=query)
            for item in body.get("items") or []:
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", resource.api_version)
                listing.items.append(keep(item) if keep else item)
            metadata = body.get("metadata") or {}
            if not listing.resource_version:
                listing.resource_version = metadata.get("resourceVersion") or ""
            token = metadata.get("continue")
            if not token:
                return listing

    def watch(
        self,
        kind: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        stop: threading.Event | None = None,
    ) -> Iterator[WatchEvent]:
        """Changes to matching objects after ``resource_version``, until the API server ends
        the watch (after ``timeout_seconds``) or ``stop`` is set. Bookmarks come through as
        ``BOOKMARK`` events carrying only a newer resourceVersion.

        Raises ``ResourceVersionExpired`` (410 Gone) when the version is too old to resume
        from: list again. Connection failures raise ``ClusterUnreachable``.
        """
        resource = WORKLOAD_KINDS[kind]
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        what = f"a watch of the {resource.plural}"
        response = self._stream(
            resource.path(), query=query, what=what, read_timeout=timeout_seconds + 30
        )
        try:
            for line in iter_resp_lines(response):
                if stop is not None and stop.is_set():
                    return
                if not line:
                    continue
                event = orjson.loads(line)
                kind_of_event = event.get("type")
                obj = event.get("object") or {}
                if kind_of_event == "ERROR":
                    fields = {
                        "status": obj.get("code"),
                        "reason": obj.get("reason") or "",
                        "details": obj.get("details") or {},
                    }
                    if obj.get("code") == 410:
                        raise ResourceVersionExpired(
                            f"The watch of {resource.plural} on cluster {self.cluster_name} "
                            f"fell too far behind ({obj.get('message')}). Listing again.",
                            **fields,
                        )
                    raise KubeError(
                        f"The watch of {resource.plural} on cluster {self.cluster_name} ended "
                        f"with an error: {obj.get('message') or obj}",
                        **fields,
                    )
                obj.setdefault("kind", kind)
                yield WatchEvent(type=kind_of_event, object=obj)
        except (HTTPError, OSError) as error:
            if stop is not None and stop.is_set():
                return
            raise ClusterUnreachable(self._unreachable(error)) from error
        finally:
            response.release_conn()

    # -- Kueue's queues

    def pending_workloads(self, cluster_queue: str, *, limit: int = 1000) -> list[dict]:
        """The ClusterQueue's pending workloads, first to be admitted first: each with its
        ``metadata`` (name, namespace, creationTimestamp, ownerReferences: the Job),
        ``priority``, ``localQueueName``, ``positionInClusterQueue`` and
        ``positionInLocalQueue`` (0-based). Kueue answers this itself: while Kueue is down the
        API server answers 503 (``ServerError``)."""
        body = self._call(
            "GET",
            f"{VISIBILITY_API}/clusterqueues/{quote(cluster_queue, safe='')}/pendingworkloads",
            what=f"the pending workloads of ClusterQueue {cluster_queue}",
            query=[("limit", str(limit))],
        )
        return list(body.get("items") or [])

    # -- logs

    def pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        limit_bytes: int | None = None,
        previous: bool = False,
    ) -> str:
        """The pod's log as text: the last ``tail_lines`` lines, at most ``limit_bytes``."""
        query = self._log_query(container, tail_lines, limit_bytes, previous=previous)
        what = f"the log of pod {pod}" + (f" ({container})" if container else "")
        response = self._stream(
            PODS.path(namespace=namespace, name=pod) + "/log",
            query=query,
            what=what,
            read_timeout=REQUEST_TIMEOUT[1],
        )
        try:
            return response.data.decode("utf-8", errors="replace")
        except (HTTPError, OSError) as error:
            raise ClusterUnreachable(self._unreachable(error)) from error
        finally:
            response.release_conn()

    def follow_pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
    ) -> AsyncIterator[str]:
        """The pod's log line by line as it is written, until the container ends.

        An async iterator, read on the event loop rather than in a thread: a followed log may
        last many minutes, and must not hold a web worker (or a thread) all that time. The
        credentials are read here; the connection opens when the iterator is first read, and
        every failure comes out of it as a ``KubeError``. ``FOLLOW_READ_TIMEOUT`` seconds
        without a byte end it (``ClusterUnreachable``).
        """
        configuration = self.api.configuration
        url = configuration.host + PODS.path(namespace=namespace, name=pod) + "/log"
        query = [*self._log_query(container, tail_lines, None), ("follow", "true")]
        headers = {"Accept": "*/*"}
        # The bearer token, if the kubeconfig has one (refreshed here when it expires).
        for auth in configuration.auth_settings().values():
            if auth["in"] == "header" and auth["value"]:
                headers[auth["key"]] = auth["value"]
        what = f"the log of pod {pod}" + (f" ({container})" if container else "")
        with self._count_lock:
            self.reads += 1
        return self._follow(url, query=query, headers=headers, what=what)

    async def _follow(self, url: str, *, query: list, headers: dict, what: str):
        configuration = self.api.configuration
        timeout = httpx.Timeout(REQUEST_TIMEOUT[0], read=FOLLOW_READ_TIMEOUT)
        try:
            async with (
                httpx.AsyncClient(
                    verify=_ssl_context(configuration),
                    proxy=configuration.proxy or None,
                    trust_env=False,
                    timeout=timeout,
                ) as http,
                http.stream("GET", url, params=query, headers=headers) as response,
            ):
                if response.status_code != 200:
                    error = ApiException(status=response.status_code, reason=response.reason_phrase)
                    error.body = (await response.aread()).decode("utf-8", errors="replace")
                    raise self._translate(error, method="GET", what=what) from None
                async for line in response.aiter_lines():
                    yield line
        except (httpx.TransportError, OSError) as error:
            raise ClusterUnreachable(self._unreachable(error)) from error

    @staticmethod
    def _log_query(container, tail_lines, limit_bytes, *, previous: bool = False) -> list:
        query = []
        if container:
            query.append(("container", container))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        if limit_bytes is not None:
            query.append(("limitBytes", str(limit_bytes)))
        if previous:
            query.append(("previous", "true"))
        return query

    # -- raw requests

    def _stream(self, path: str, *, query: list, what: str, read_timeout: float):
        """A GET whose body the caller reads (a watch or a log), errors as ``KubeError``s."""
        self.reads += 1
        try:
            return self.api.call_api(
                path,
                "GET",
                query_params=query,
                header_params={"Accept": "application/json, */*"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=(REQUEST_TIMEOUT[0], read_timeout),
            )
        except ApiException as error:
            raise self._translate(error, method="GET", what=what) from error
        except (HTTPError, OSError) as error:
            raise ClusterUnreachable(self._unreachable(error)) from error


__all__ = [
    "CLUSTER_QUEUES",
    "DEPLOYMENTS",
    "EVENTS",
    "JOBS",
    "PODS",
    "REPLICA_SETS",
    "RESOURCE_FLAVORS",
    "WORKLOADS",
    "Listing",
    "WatchEvent",
    "WorkloadClient",
]
