"""Kueue's configuration and the objects `up` applies before starting it (pure builders; applying
them is devcluster.kueue).

Kueue's manager (built from sigs.k8s.io/kueue by builder.py) runs on the host like the control
plane. Its CRDs, RBAC and webhook configurations come from the manifests the Kueue module ships
(`config/components/...`, copied into the binary cache at build time) and are transformed the
way Kueue's own kustomization does (`kueue-` name prefix, namespace `kueue-system`), with three
local differences:

* the webhooks (admission and CRD conversion) are called at ``https://127.0.0.1:<port>`` with a
  serving certificate from the devcluster's CA, instead of through a Service with certificates
  Kueue makes itself (internal cert management needs the certificate Secret mounted into a pod);
* the manager authenticates as a minted user named as Kueue's own ServiceAccount
  (``system:serviceaccount:kueue-system:kueue-controller-manager``), bound to Kueue's own
  roles: the portal's admission policies let only that identity un-suspend a queued Job or
  lift a queued pod's gate, as on a cluster where Kueue runs in a pod;
* the visibility API's Service is of type ExternalName pointing at 127.0.0.1, which the API
  server's aggregator resolves to ``https://127.0.0.1:<visibility port>``.

Only the webhooks of the enabled integrations (FRAMEWORKS) and of Kueue's own kinds are
registered: Kueue answers the others with no-op handlers, and Kueue's Helm chart leaves them
`Ignore` for that case. The pod-based integrations' webhooks (pods, Deployments) are called only
for objects labelled with a queue: every other pod, CPU pods and quota-mode namespaces' included,
is created without Kueue, and while Kueue is down.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import yaml

NAMESPACE = "kueue-system"
# Kueue's own ServiceAccount, as its manifests and Helm chart install it (see the docstring).
USER = "system:serviceaccount:kueue-system:kueue-controller-manager"
NAME_PREFIX = "kueue-"
GROUP = "kueue.x-k8s.io"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
LABELS = {"app.kubernetes.io/name": "kueue", "devcluster.gpuportal.io/managed": "true"}
# The job kinds Kueue manages here; each enables that integration's webhooks too. The portal
# submits batch Jobs, and its inference services are Deployments whose pods Kueue queues one by
# one (the pod integration, which the Deployment integration needs).
FRAMEWORKS = ("batch/job", "pod", "deployment")
# How Kueue's kustomization names the namespace it rewrites to the real one.
_PLACEHOLDER_NAMESPACE = "system"
# Pod-based integrations never act on these namespaces (Kueue's own webhook kustomization).
_POD_BASED = {"pod", "deployment", "statefulset"}
# ... and are called only for objects labelled with a queue (see the docstring).
_QUEUED_OBJECTS_SELECTOR = {"matchExpressions": [{"key": QUEUE_NAME_LABEL, "operator": "Exists"}]}
_SYSTEM_NAMESPACES_SELECTOR = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", NAMESPACE],
        }
    ]
}
_CONVERSION_PATCH_PREFIX = "patches/webhook_in_"


def serving_names() -> list[str]:
    """DNS names of the serving certificate (IP 127.0.0.1 besides): the aggregator checks the
    visibility server's certificate against `<service>.<namespace>.svc`."""
    return [
        "localhost",
        f"{NAME_PREFIX}webhook-service.{NAMESPACE}.svc",
        f"{NAME_PREFIX}visibility-server.{NAMESPACE}.svc",
    ]


def configuration(
    *,
    health_port: int,
    metrics_port: int,
    webhook_port: int,
    visibility_port: int,
    cert_dir: Path,
) -> dict:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2).

    Jobs and pods without the queue-name label are left alone, so a cluster in `quota only` mode
    works as if Kueue were absent. Fair sharing is on (a ClusterQueue's `fairSharing.weight`
    counts and borrowing workloads of a cohort are preempted to give a lender back its nominal
    quota, with the ClusterQueue's `preemption` policies); waitForPodsReady is off. Controller
    concurrency and client rates are those of Kueue's own default configuration.
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": visibility_port},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": copy.deepcopy(_SYSTEM_NAMESPACES_SELECTOR),
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "fairSharing": {
            "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
        },
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 50, "burst": 100},
    }


# libyaml's loader when PyYAML has it: Kueue's Workload CRD alone is 1 MB of YAML.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.load_all(path.read_text(), Loader=_LOADER) if doc]


def _labelled(obj: dict) -> dict:
    obj.setdefault("metadata", {}).setdefault("labels", {}).update(LABELS)
    return obj


def _client_config(webhook_url: str, path: str, ca_bundle: str) -> dict:
    return {"url": f"{webhook_url}{path}", "caBundle": ca_bundle}


def ca_bundle(ca_cert: Path) -> str:
    """A PEM file as the base64 a caBundle field wants."""
    return base64.b64encode(ca_cert.read_bytes()).decode()


def conversion_crds(crd_dir: Path) -> set[str]:
    """CRDs whose versions Kueue's webhook converts: those Kueue's crd kustomization patches."""
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    names = set()
    for patch in kustomization.get("patches") or []:
        path = patch.get("path", "")
        if path.startswith(_CONVERSION_PATCH_PREFIX):
            plural = path.removeprefix(_CONVERSION_PATCH_PREFIX).removesuffix(".yaml")
            names.add(f"{plural}.{GROUP}")
    return names


def crds(crd_dir: Path, webhook_url: str, ca: str) -> list[dict]:
    """Kueue's CRDs (crd/bases), those with a conversion webhook pointed at ours."""
    converted = conversion_crds(crd_dir)
    result = []
    for path in sorted((crd_dir / "bases").glob("*.yaml")):
        for crd in _documents(path):
            if crd["metadata"]["name"] in converted:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": _client_config(webhook_url, "/convert", ca),
                        "conversionReviewVersions": ["v1"],
                    },
                }
            result.append(_labelled(crd))
    return result


def framework_of(rule: dict) -> str | None:
    """The integration a webhook rule belongs to (`batch/job`, `pod`, `kubeflow.org/mpijob`),
    or None for Kueue's own kinds, whose webhooks are always registered."""
    group = rule["apiGroups"][0]
    kind = rule["resources"][0].split("/")[0].removesuffix("s")
    if group == GROUP:
        return None
    if group in ("", "apps"):
        return kind
    return f"{group}/{kind}"


def webhook_configurations(
    webhook_dir: Path, webhook_url: str, ca: str, frameworks: tuple[str, ...] = FRAMEWORKS
) -> list[dict]:
    """The Mutating and ValidatingWebhookConfiguration, calling Kueue at webhook_url."""
    result = []
    for config in _documents(webhook_dir / "manifests.yaml"):
        webhooks = []
        for webhook in config["webhooks"]:
            framework = framework_of(webhook["rules"][0])
            if framework is not None and framework not in frameworks:
                continue
            webhook = copy.deepcopy(webhook)
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = _client_config(webhook_url, path, ca)
            if framework in _POD_BASED:
                webhook["namespaceSelector"] = copy.deepcopy(_SYSTEM_NAMESPACES_SELECTOR)
                webhook["objectSelector"] = copy.deepcopy(_QUEUED_OBJECTS_SELECTOR)
            webhooks.append(webhook)
        config["metadata"]["name"] = NAME_PREFIX + config["metadata"]["name"]
        config["webhooks"] = webhooks
        result.append(_labelled(config))
    return result


def _namespaced(obj: dict) -> dict:
    metadata = obj["metadata"]
    if metadata.get("namespace") == _PLACEHOLDER_NAMESPACE:
        metadata["namespace"] = NAMESPACE
    return obj


def rbac(manifest_dirs: list[Path], user: str = USER) -> list[dict]:
    """Kueue's roles (`kueue-` prefixed) and its bindings, bound to `user` instead of Kueue's
    ServiceAccount; a binding to a role Kueue does not ship (the API server's
    extension-apiserver-authentication-reader) keeps its role's name."""
    documents = [
        doc
        for directory in manifest_dirs
        for path in sorted(directory.glob("*.yaml"))
        for doc in _documents(path)
    ]
    roles = [doc for doc in documents if doc.get("kind") in ("Role", "ClusterRole")]
    role_names = {role["metadata"]["name"] for role in roles}
    result = []
    for role in roles:
        role["metadata"]["name"] = NAME_PREFIX + role["metadata"]["name"]
        result.append(_labelled(_namespaced(role)))
    subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
    for binding in documents:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        binding["metadata"]["name"] = NAME_PREFIX + binding["metadata"]["name"]
        if binding["roleRef"]["name"] in role_names:
            binding["roleRef"]["name"] = NAME_PREFIX + binding["roleRef"]["name"]
        binding["subjects"] = [dict(subject)]
        result.append(_labelled(_namespaced(binding)))
    return result


def visibility(visibility_dir: Path, port: int, ca: str) -> list[dict]:
    """The visibility API: an ExternalName Service naming 127.0.0.1, and Kueue's APIServices
    pointed at it on the visibility server's port, trusting the devcluster CA."""
    service_name = NAME_PREFIX + "visibility-server"
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service_name, "namespace": NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
    }
    result = [_labelled(service)]
    for path in sorted(visibility_dir.glob("apiservice_*.yaml")):
        for api_service in _documents(path):
            spec = api_service["spec"]
            spec.pop("insecureSkipTLSVerify", None)
            spec["service"] = {"name": service_name, "namespace": NAMESPACE, "port": port}
            spec["caBundle"] = ca
            result.append(_labelled(api_service))
    return result


def namespace() -> dict:
    return _labelled({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})


def api_path(obj: dict) -> str:
    """The REST path of an object, for the kinds this module applies."""
    api_version = obj["apiVersion"]
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    metadata = obj["metadata"]
    scope = f"/namespaces/{metadata['namespace']}" if metadata.get("namespace") else ""
    return f"{base}{scope}/{plural(obj['kind'])}/{metadata['name']}"


def plural(kind: str) -> str:
    """The resource name of a kind the devcluster applies (``ValidatingAdmissionPolicy`` ->
    ``validatingadmissionpolicies``, ``GatewayClass`` -> ``gatewayclasses``, ``Gateway`` ->
    ``gateways``)."""
    kind = kind.lower()
    if kind.endswith("y") and kind[-2:-1] not in "aeiou":
        return f"{kind[:-1]}ies"
    return f"{kind}es" if kind.endswith("s") else f"{kind}s"
