"""The portal's one way to change a cluster: server-side apply under one field manager, delete,
get, and list by label, with every failure turned into a ``KubeError`` a person can act on.

A ``KubeError`` carries the API server's answer: its HTTP ``status`` and its Status object's
``reason`` and ``details``. Callers tell refusals apart by class (``NotFound``, ``AlreadyExists``,
``Conflict``, ``QuotaExceeded``, ...) or by those fields, never by the message, which is for
people.

Objects go in and come out as plain dicts (the API's JSON), never the client's model classes:
what the portal builds (``reconcile.manifests``) is compared with what the cluster holds without
translation, and reading JSON is several times faster than building model objects.

``KubeClient`` counts the requests it makes (``reads`` and ``writes``), so callers can prove that
a pass over an unchanged cluster writes nothing.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import orjson
from django.conf import settings
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from clusters.models import Cluster
from clusters.vocabulary import GATEWAY_API_VERSION, KUEUE_API_VERSION

# (connect, read) seconds: a cluster that does not answer is an error to retry, not a hang.
REQUEST_TIMEOUT = (5, 30)
# Connections kept open to one cluster per process. Requests in flight at once beyond it open
# a fresh TLS connection each (and urllib3 throws it away after): a reconcile sweep's passes
# run side by side over one client, so the pool holds as many as they have in flight.
CONNECTIONS_PER_CLUSTER = 64


# --- errors ------------------------------------------------------------------------------------


class KubeError(Exception):
    """The cluster did not do what the portal asked. The message is shown to leads and admins
    as it is, so it says what happened and what to do about it.

    ``status`` is the HTTP status the API server answered (None when none answered: no
    credentials, unreachable); ``reason`` and ``details`` are those of its Status object
    (``"NotFound"``, ``{"kind": "namespaces", "name": "vision"}``).
    """

    transient = False

    def __init__(
        self,
        message: str = "",
        *,
        status: int | None = None,
        reason: str = "",
        details: dict | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.details = details or {}


class TransientKubeError(KubeError):
    """Worth retrying as it is: the cluster was unreachable, busy, or the object was changing."""

    transient = True


class ClusterNotConfigured(KubeError):
    """The portal has no usable credentials for the cluster."""


class ClusterUnreachable(TransientKubeError):
    """No answer from the API server (down, restarting, network)."""


class Conflict(TransientKubeError):
    """409: the object changed under the request (or a delete's uid precondition failed); also
    a 403 for content in a namespace that is being deleted."""


class NotFound(KubeError):
    """404: the object (or the namespace it would live in: see ``details["kind"]``) does not
    exist."""


class AlreadyExists(KubeError):
    """409 with reason AlreadyExists: a create found an object of that name."""


class QuotaExceeded(KubeError):
    """403 from ResourceQuota admission: the namespace's quota does not leave room."""


class ResourceVersionExpired(KubeError):
    """410 Gone: the resourceVersion a watch or list resumed from is older than the API server
    keeps; the caller must list everything again."""


class Throttled(TransientKubeError):
    """429: the API server asks the portal to slow down."""


class ServerError(TransientKubeError):
    """5xx: the API server failed (often while it starts or its etcd is unavailable)."""


class Forbidden(TransientKubeError):
    """403: the portal's credentials lack a permission (or an admission rule refused).

    Retried all the same: a role granted a moment ago, or an API server that has just started
    and whose authorizer has not loaded RBAC yet, answer 403 for a while. The message is on the
    team's status from the first refusal, for a person to act on if it lasts.
    """


class Unauthorized(TransientKubeError):
    """401: the API server does not accept the portal's credentials (retried, as a renewed
    token or an authenticator still starting may fix it)."""


class WebhookUnavailable(ServerError):
    """500 because an admission webhook the API server must call did not answer: the webhook's
    server is down (Kueue's, while Kueue is not running, refuses every Job and every change to
    its queues and flavors). Nothing was changed; worth retrying once the webhook is back.
    ``webhook`` names it (``mjob.kb.io``)."""

    def __init__(self, message: str = "", *, webhook: str = "", **fields):
        super().__init__(message, **fields)
        self.webhook = webhook


class Invalid(KubeError):
    """400/422: the API server refused the object as invalid."""


class NotOwned(KubeError):
    """An object the portal would create already exists without the portal's label: someone
    else made it, and the portal never takes over what it did not create."""


# --- kinds -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """Where a kind lives in the API: its group/version, plural and whether it is namespaced."""

    api_version: str
    plural: str
    namespaced: bool

    def path(self, *, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        return base


KINDS: dict[str, Kind] = {
    "Namespace": Kind("v1", "namespaces", namespaced=False),
    "ResourceQuota": Kind("v1", "resourcequotas", namespaced=True),
    "LimitRange": Kind("v1", "limitranges", namespaced=True),
    "RoleBinding": Kind("rbac.authorization.k8s.io/v1", "rolebindings", namespaced=True),
    "NetworkPolicy": Kind("networking.k8s.io/v1", "networkpolicies", namespaced=True),
    "Node": Kind("v1", "nodes", namespaced=False),
    # The admission policies the portal installs on a cluster for the namespaces it manages.
    "ValidatingAdmissionPolicy": Kind(
        "admissionregistration.k8s.io/v1", "validatingadmissionpolicies", namespaced=False
    ),
    "ValidatingAdmissionPolicyBinding": Kind(
        "admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", namespaced=False
    ),
    # Kueue's, in a cluster in Kueue mode: per cluster the flavors of its GPU models, the
    # priority classes and the cohorts of its departments, per team its queues.
    "ResourceFlavor": Kind(KUEUE_API_VERSION, "resourceflavors", namespaced=False),
    "WorkloadPriorityClass": Kind(KUEUE_API_VERSION, "workloadpriorityclasses", namespaced=False),
    "ClusterQueue": Kind(KUEUE_API_VERSION, "clusterqueues", namespaced=False),
    "LocalQueue": Kind(KUEUE_API_VERSION, "localqueues", namespaced=True),
    "Cohort": Kind(KUEUE_API_VERSION, "cohorts", namespaced=False),
    # An inference service's: a Deployment per live revision, Services, and on a cluster with
    # the Gateway API's CRDs the HTTPRoute that splits its traffic.
    "Deployment": Kind("apps/v1", "deployments", namespaced=True),
    "Service": Kind("v1", "services", namespaced=True),
    "HTTPRoute": Kind(GATEWAY_API_VERSION, "httproutes", namespaced=True),
    # An interactive session's: the token Secret of its server, and its member's home volume.
    "Secret": Kind("v1", "secrets", namespaced=True),
    "PersistentVolumeClaim": Kind("v1", "persistentvolumeclaims", namespaced=True),
    # The watcher's leader election, one per cluster in the portal's own namespace.
    "Lease": Kind("coordination.k8s.io/v1", "leases", namespaced=True),
}


def kind_of(obj: dict) -> Kind:
    try:
        return KINDS[obj["kind"]]
    except KeyError as error:
        raise ValueError(
            f"the portal does not manage objects of kind {obj.get('kind')!r}"
        ) from error


def describe(kind: str, name: str, namespace: str | None = None) -> str:
    """``ResourceQuota gpu-portal-quota in namespace vision``: how messages name an object."""
    return f"{kind} {name}" + (f" in namespace {namespace}" if namespace else "")


# --- connection --------------------------------------------------------------------------------


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def connection_configured(cluster: Cluster) -> bool:
    """Whether the portal has a way to reach the cluster: a kubeconfig, or running inside it."""
    return bool(cluster.kubeconfig_path) or _in_cluster()


def _configuration(cluster: Cluster) -> client.Configuration:
    configuration = client.Configuration()
    path = cluster.kubeconfig_path
    try:
        if path:
            if not Path(path).is_file():
                raise ClusterNotConfigured(
                    f"The kubeconfig for cluster {cluster.name} ({path}) does not exist. "
                    "An admin must set a readable kubeconfig path on the cluster."
                )
            config.load_kube_config(config_file=path, client_configuration=configuration)
        elif _in_cluster():
            config.load_incluster_config(client_configuration=configuration)
        else:
            raise ClusterNotConfigured(
                f"Cluster {cluster.name} has no kubeconfig path and the portal is not running "
                "inside a cluster. An admin must set the cluster's kubeconfig path."
            )
    except (config.ConfigException, OSError, ValueError) as error:
        raise ClusterNotConfigured(
            f"The credentials for cluster {cluster.name} cannot be loaded: {error}"
        ) from error
    if cluster.api_server_url:
        configuration.host = cluster.api_server_url.rstrip("/")
    configuration.connection_pool_maxsize = CONNECTIONS_PER_CLUSTER
    return configuration


_clients: dict[tuple, client.ApiClient] = {}
_clients_lock = threading.Lock()


def _api_client(cluster: Cluster) -> client.ApiClient:
    """One ApiClient per cluster and kubeconfig version per process, so connections are reused
    across tasks; a changed kubeconfig (path, URL or file contents) gets a new one."""
    path = cluster.kubeconfig_path
    try:
        stamp = Path(path).stat().st_mtime_ns if path else None
    except OSError:
        stamp = None
    key = (cluster.pk, cluster.name, path, stamp, cluster.api_server_url, os.getpid())
    with _clients_lock:
        api = _clients.get(key)
        if api is None:
            api = client.ApiClient(_configuration(cluster))
            for old_key in [k for k in _clients if k[0] == cluster.pk]:
                _clients.pop(old_key)  # no close(): another thread may still be using it
            _clients[key] = api
        return api


# --- the client --------------------------------------------------------------------------------


class KubeClient:
    """Reads and writes for one cluster, as one field manager, counting its requests."""

    def __init__(self, api: client.ApiClient, *, cluster_name: str, field_manager: str):
        self.api = api
        self.cluster_name = cluster_name
        self.field_manager = field_manager
        self.reads = 0
        self.writes = 0
        self._count_lock = threading.Lock()  # requests of one pass may run in threads
        self._parent: KubeClient | None = None

    def counting_apart(self) -> KubeClient:
        """A client over the same connections whose own ``reads`` and ``writes`` count only
        the requests made through it (they count on this one too): for work done side by side,
        each part counted on its own."""
        part = KubeClient(
            self.api, cluster_name=self.cluster_name, field_manager=self.field_manager
        )
        part._parent = self
        return part

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> KubeClient:
        return cls(
            _api_client(cluster), cluster_name=cluster.name, field_manager=settings.PORTAL_NAME
        )

    @classmethod
    def from_kubeconfig(cls, path: str | Path, *, cluster_name: str = "cluster") -> KubeClient:
        """For scripts and benchmarks: a client from a kubeconfig file, without a Cluster row."""
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=configuration)
        configuration.connection_pool_maxsize = CONNECTIONS_PER_CLUSTER
        return cls(
            client.ApiClient(configuration),
            cluster_name=cluster_name,
            field_manager=settings.PORTAL_NAME,
        )

    # -- requests

    def _call(
        self,
        method: str,
        path: str,
        *,
        what: str,
        query=None,
        body=None,
        content_type: str | None = None,
        raw: bool = False,
    ):
        """One request; its answer decoded from JSON, or with ``raw`` the undecoded response
        (the caller reads its ``data`` and releases its connection)."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        counted = self
        while counted is not None:
            with counted._count_lock:
                if method == "GET":
                    counted.reads += 1
                else:
                    counted.writes += 1
            counted = counted._parent
        try:
            return self.api.call_api(
                path,
                method,
                query_params=list(query or []),
                header_params=headers,
                body=body,
                response_type="object",
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=not raw,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            raise self._translate(error, method=method, what=what) from error
        except (HTTPError, OSError) as error:
            raise ClusterUnreachable(self._unreachable(error)) from error

    def _unreachable(self, error: Exception) -> str:
        return (
            f"Cannot reach the API server of cluster {self.cluster_name} "
            f"({self.api.configuration.host}): {type(error).__name__}. The portal retries on its "
            "own; if this lasts, check that "
            "the cluster is up and reachable from the portal."
        )

    def _translate(self, error: ApiException, *, method: str, what: str) -> KubeError:
        """The API server's answer as a portal error whose message says what to do, and whose
        class and fields say what happened."""
        status = error.status or 0
        answer = _api_status(error)
        message = str(answer.get("message") or error.reason or f"HTTP {status}").strip()
        verb = {
            "GET": "read",
            "PATCH": "apply",
            "DELETE": "delete",
            "POST": "create",
            "PUT": "update",
        }[method]
        if status == 0:
            return ClusterUnreachable(self._unreachable(error))
        fields = {
            "status": status,
            "reason": str(answer.get("reason") or ""),
            "details": answer.get("details") or {},
        }
        if status == 401:
            return Unauthorized(
                f"Cluster {self.cluster_name} does not accept the portal's credentials "
                f"({message}). An admin must renew the kubeconfig or service-account token.",
                **fields,
            )
        if status == 403:
            if _has_cause(fields["details"], NAMESPACE_TERMINATING):
                return Conflict(
                    f"Cannot {verb} {what} on cluster {self.cluster_name}: the namespace is "
                    "being deleted. The portal tries again once it is gone.",
                    **fields,
                )
            if _is_quota_refusal(fields["reason"], message):
                return QuotaExceeded(
                    f"Cluster {self.cluster_name} refused {what}: {message}", **fields
                )
            return Forbidden(
                f"Cluster {self.cluster_name} does not let the portal {verb} {what}: {message}. "
                "A cluster admin must grant the portal the role in deploy/rbac.yaml.",
                **fields,
            )
        if status == 404:
            return NotFound(
                f"Cluster {self.cluster_name} answered 404 to {verb} {what}: {message}", **fields
            )
        if status == 409:
            if fields["reason"] == "AlreadyExists":
                return AlreadyExists(
                    f"Cannot {verb} {what} on cluster {self.cluster_name}: {message}", **fields
                )
            return Conflict(
                f"Cannot {verb} {what} on cluster {self.cluster_name}: it changed at the same "
                f"time ({message}). The portal tries again.",
                **fields,
            )
        if status == 410:
            return ResourceVersionExpired(
                f"Reading {what} on cluster {self.cluster_name} took too long: the API server no "
                f"longer keeps the version it started from ({message}). Listing again.",
                **fields,
            )
        if status == 429:
            return Throttled(
                f"Cluster {self.cluster_name} asked the portal to slow down while it tried to "
                f"{verb} {what}. The portal tries again shortly.",
                **fields,
            )
        if status >= 500 and (webhook := _failed_webhook(message)):
            return WebhookUnavailable(
                f"Cluster {self.cluster_name} cannot {verb} {what} now: its admission webhook "
                f"{webhook} does not answer ({message}). While Kueue is not running its webhooks "
                "refuse every Job and every change to its queues; nothing is lost, and the portal "
                "tries again until it is back.",
                webhook=webhook,
                **fields,
            )
        if status >= 500:
            return ServerError(
                f"The API server of cluster {self.cluster_name} failed to {verb} {what} "
                f"({status}: {message}). The portal tries again.",
                **fields,
            )
        if status in (400, 422):
            return Invalid(
                f"Cluster {self.cluster_name} refused {what} as invalid: {message}. "
                "This is a bug in the portal or a cluster policy; tell the portal's admins.",
                **fields,
            )
        return KubeError(
            f"Cluster {self.cluster_name} answered {status} to {verb} {what}: {message}",
            **fields,
        )

    # -- operations

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        """The object as JSON, or None when it does not exist."""
        path = KINDS[kind].path(namespace=namespace, name=name)
        try:
            return self._call("GET", path, what=describe(kind, name, namespace))
        except NotFound:
            return None

    def list(
        self, kind: str, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict]:
        query = [("labelSelector", label_selector)] if label_selector else []
        what = f"the {KINDS[kind].plural}" + (f" in namespace {namespace}" if namespace else "")
        # A sweep's lists hold thousands of objects: decoded by orjson, several times faster
        # than the client's json.
        response = self._call(
            "GET", KINDS[kind].path(namespace=namespace), what=what, query=query, raw=True
        )
        try:
            body = orjson.loads(response.data)
        except (HTTPError, OSError) as error:
            raise ClusterUnreachable(self._unreachable(error)) from error
        finally:
            response.release_conn()
        items = body.get("items") or []
        for item in items:  # lists leave out each item's kind
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", KINDS[kind].api_version)
        return items

    def serves(self, kind: str) -> bool:
        """Whether the cluster serves the kind (its CRD is installed), from the API's discovery
        of the kind's group and version: one GET, allowed to every authenticated user."""
        resource = KINDS[kind]
        base = "/api/v1" if resource.api_version == "v1" else f"/apis/{resource.api_version}"
        try:
            body = self._call("GET", base, what=f"the API's discovery of {resource.api_version}")
        except NotFound:
            return False
        return any(item.get("name") == resource.plural for item in body.get("resources") or [])

    def apply(self, obj: dict) -> dict:
        """Server-side apply as the portal's field manager, taking back fields someone else
        changed by hand (force): the portal's desired state wins for the fields it sets."""
        metadata = obj["metadata"]
        namespace = metadata.get("namespace")
        path = kind_of(obj).path(namespace=namespace, name=metadata["name"])
        return self._call(
            "PATCH",
            path,
            what=describe(obj["kind"], metadata["name"], namespace),
            query=[("fieldManager", self.field_manager), ("force", "true")],
            body=obj,
            content_type="application/apply-patch+yaml",
        )

    def delete(
        self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None
    ) -> bool:
        """Delete the object; with ``uid``, only that very object (not one recreated under the
        same name since it was read). False when it was already gone."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        path = KINDS[kind].path(namespace=namespace, name=name)
        try:
            self._call(
                "DELETE",
                path,
                what=describe(kind, name, namespace),
                body=body,
                content_type="application/json",
            )
        except NotFound:
            return False
        return True


# The cause the namespace lifecycle admission puts on a 403 for a namespace being deleted.
NAMESPACE_TERMINATING = "NamespaceTerminating"


def _api_status(error: ApiException) -> dict:
    """The API server's Status object from an error's body ({} when the body is not one)."""
    try:
        body = json.loads(error.body or "")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _has_cause(details: dict, reason: str) -> bool:
    return any(cause.get("reason") == reason for cause in details.get("causes") or [])


def _is_quota_refusal(reason: str, message: str) -> bool:
    """Whether a 403 is ResourceQuota admission refusing the object.

    The API server says so only in words: it answers a plain Forbidden Status with no cause in
    ``details`` (checked on the devcluster's kube-apiserver v1.36.3: ``{"reason": "Forbidden",
    "details": {"name": "p", "kind": "pods"}, "message": "pods \"p\" is forbidden: exceeded
    quota: q, requested: ..."}``). So the admission error that Forbidden wraps, the part after
    ``is forbidden:``, is read for the quota plugin's own prefix; nothing else in the message is.
    """
    admission_error = message.partition(" is forbidden: ")[2]
    return reason == "Forbidden" and admission_error.startswith("exceeded quota: ")


def _failed_webhook(message: str) -> str:
    """The webhook named in a 500 the API server answers when it could not call one, or "".

    As with quota refusals the API server says so only in words (checked on the devcluster's
    kube-apiserver v1.36.3 with Kueue stopped: ``{"reason": "InternalError", "details":
    {"causes": [{"message": "failed calling webhook \"mjob.kb.io\": ... connection refused"}]},
    "message": "Internal error occurred: failed calling webhook \"mjob.kb.io\": ..."}``), so
    the webhook admission plugin's own words are looked for, and the quoted name after them.
    """
    found = re.search(r'failed calling webhook "([^"]+)"', message)
    return found.group(1) if found else ""


def selector(labels: dict[str, str]) -> str:
    """A label selector matching every one of the labels: ``a=b,c=d``."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
