"""The ValidatingAdmissionPolicies (``admissionregistration.k8s.io/v1``) the portal installs on
each cluster, and their bindings to the namespaces it manages, as plain dicts. Pure functions:
no database, no network; ``tenants.cluster_reconcile`` applies them.

The portal's job checks (``gpujobs.admission``) refuse what these refuse, with a 400, before
anything reaches the cluster; these make the same rules hold for everything created in a team
namespace by anyone else (a member with kubectl, a controller acting for them):

``<portal>-team-pods``, on every pod created, and on every pod update that changes its spec:

* a pod asking for GPUs (any resource under ``GPU_RESOURCE_PREFIXES``) must be placed on GPU
  nodes, by a node selector or by a required node affinity every term of which holds the
  cluster's GPU node labels, and must tolerate the GPU taint; Kueue's admission, which adds
  its flavor's node selector and toleration to the pods of a Job it admits, keeps a pod within
  these rules;
* a pod asking for none must not tolerate the GPU taint (nor every taint, with an ``Exists``
  toleration without a key), so it stays off GPU nodes;
* no pod may set ``spec.nodeName`` (it would skip the scheduler, and with it affinity and
  taints);
* every image, of containers, init containers and ephemeral containers, must come from the
  cluster's allowed registries, read as the container runtime reads it
  (``clusters.image_references``, repeated here in CEL) — unless the cluster allows all;
* no container may set an ``NVIDIA_*`` variable (the device plugin sets
  ``NVIDIA_VISIBLE_DEVICES`` to the GPUs a container was given; with the default device-list
  strategy a pod setting it itself could see every GPU of its node), except
  ``NVIDIA_VISIBLE_DEVICES=void``, which hides every GPU and which the portal's CPU sidecar
  sets; ``envFrom`` needs a ``prefix`` that cannot begin an ``NVIDIA_`` name, since a
  ConfigMap or Secret could otherwise carry one past this rule;
* in a pod that asks for GPUs, every container that asks for none must set
  ``NVIDIA_VISIBLE_DEVICES=void``: on a GPU node a CUDA image's own ``NVIDIA_VISIBLE_DEVICES=all``
  would otherwise hand it every GPU of the node.

``<portal>-team-secrets``: no Secret of type ``kubernetes.io/service-account-token`` (a lasting
token for a service account, which Kubernetes fills in for whoever creates the Secret).

Pod updates that leave the spec alone (labels, finalizers: the Job controller's, Kueue's) are
not checked, so a pod that was there before the policy never gets stuck.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clusters.image_references import (
    DOCKER_HUB,
    LEGACY_DOCKER_HUB,
    MAX_NAME_LENGTH,
    OFFICIAL_PREFIX,
    REFERENCE_PATTERN,
)
from clusters.vocabulary import (
    ADMISSION_POLICY_PODS,
    ADMISSION_POLICY_SECRETS,
    GPU_RESOURCE_PREFIXES,
    MANAGED_BY_LABEL,
    NO_GPUS,
    NVIDIA_ENV_PREFIX,
    NVIDIA_VISIBLE_DEVICES,
    admission_policy_name,
)
from tenants import manifests

API_VERSION = "admissionregistration.k8s.io/v1"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
HIDE_GPUS = (NVIDIA_VISIBLE_DEVICES, NO_GPUS)
NVIDIA_PREFIX = NVIDIA_ENV_PREFIX
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


@dataclass(frozen=True)
class ClusterRules:
    """What the policies depend on: the cluster's GPU placement and its allowed registries
    (normalised entries, ``clusters.image_references.registry_entries``)."""

    portal_name: str
    gpu_node_selector: tuple[tuple[str, str], ...] = ()
    gpu_taint_key: str = ""
    allowed_registries: tuple[str, ...] = ()
    allow_all_registries: bool = False


def cluster_rules(
    *,
    portal_name: str,
    gpu_node_selector: dict[str, str] | None = None,
    gpu_taint_key: str = "",
    allowed_registries: Iterable[str] = (),
    allow_all_registries: bool = False,
) -> ClusterRules:
    return ClusterRules(
        portal_name=portal_name,
        gpu_node_selector=tuple(sorted((gpu_node_selector or {}).items())),
        gpu_taint_key=gpu_taint_key,
        allowed_registries=tuple(allowed_registries),
        allow_all_registries=allow_all_registries,
    )


# --- CEL ---------------------------------------------------------------------------------------


def cel_string(value: str) -> str:
    """A CEL string literal holding ``value`` exactly."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _each_container(predicate: str, *, ephemeral: str | None = None) -> str:
    """``predicate`` (over ``c``) holds for every container of the pod, of every list
    (``ephemeral`` in its place for ephemeral containers, which have no resources)."""
    checks = []
    for field in CONTAINER_LISTS:
        check = ephemeral if field == "ephemeralContainers" and ephemeral else predicate
        every = f"object.spec.{field}.all(c, {check})"
        checks.append(every if field == "containers" else f"(!has(object.spec.{field}) || {every})")
    return " && ".join(checks)


def _asks_for_gpus(container: str = "c") -> str:
    """Whether a container's limits or requests name a GPU resource."""
    gpu = " || ".join(f"r.startsWith({cel_string(prefix)})" for prefix in GPU_RESOURCE_PREFIXES)
    return (
        f"(has({container}.resources) && ("
        f"(has({container}.resources.limits) && {container}.resources.limits.exists(r, {gpu})) || "
        f"(has({container}.resources.requests) && {container}.resources.requests.exists(r, {gpu}))"
        "))"
    )


def _on_gpu_nodes(selector: tuple[tuple[str, str], ...]) -> str:
    """The pod can only land on nodes with every GPU node label: through its node selector, or
    through a required node affinity each of whose terms demands them."""
    by_selector = " && ".join(
        f"{cel_string(key)} in object.spec.nodeSelector && "
        f"object.spec.nodeSelector[{cel_string(key)}] == {cel_string(value)}"
        for key, value in selector
    )
    by_term = " && ".join(
        "has(t.matchExpressions) && t.matchExpressions.exists(e, "
        f"e.key == {cel_string(key)} && e.operator == 'In' && has(e.values) && "
        f"size(e.values) > 0 && e.values.all(v, v == {cel_string(value)}))"
        for key, value in selector
    )
    required = "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    return (
        f"(has(object.spec.nodeSelector) && {by_selector}) || "
        "(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && "
        f"has({required}) && {required}.nodeSelectorTerms.all(t, {by_term}))"
    )


def _tolerates(taint_key: str) -> str:
    """Whether toleration ``t`` tolerates the GPU taint: by its key, or every taint."""
    return (
        f"((has(t.key) && t.key == {cel_string(taint_key)}) || "
        "((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists'))"
    )


def _sets_no_nvidia_variable(container: str = "c") -> str:
    name, value = HIDE_GPUS
    env = (
        f"(!has({container}.env) || {container}.env.all(e, "
        f"!e.name.startsWith({cel_string(NVIDIA_PREFIX)}) || "
        f"(e.name == {cel_string(name)} && has(e.value) && e.value == {cel_string(value)})))"
    )
    env_from = (
        f"(!has({container}.envFrom) || {container}.envFrom.all(s, has(s.prefix) && "
        f"s.prefix != '' && !s.prefix.startsWith({cel_string(NVIDIA_PREFIX)}) && "
        f"!{cel_string(NVIDIA_PREFIX)}.startsWith(s.prefix)))"
    )
    return f"{env} && {env_from}"


def _hides_gpus(container: str = "c") -> str:
    name, value = HIDE_GPUS
    return (
        f"(has({container}.env) && {container}.env.exists(e, e.name == {cel_string(name)} && "
        f"has(e.value) && e.value == {cel_string(value)}))"
    )


# How each image is read, step by step, as ``clusters.image_references`` reads it. CEL has no
# local variables: each step is a policy variable holding a list of maps, whose values the next
# step reads back as strings.
_I, _N, _F, _R = "string(e.image)", "string(e.name)", "string(e.first)", "string(e.rest)"
_IMAGE_STEPS = (
    (
        "images",
        " + ".join(
            f"object.spec.{field}.map(c, c.image)"
            if field == "containers"
            else f"(has(object.spec.{field}) ? object.spec.{field}.map(c, c.image) : [])"
            for field in CONTAINER_LISTS
        ),
    ),
    # The name: the image without its digest, then without its tag (a ':' after the last '/').
    (
        "imageDigestless",
        "variables.images.map(i, {'image': i, "
        "'name': i.indexOf('@') < 0 ? i : i.substring(0, i.indexOf('@'))})",
    ),
    (
        "imageNames",
        f"variables.imageDigestless.map(e, {{'image': {_I}, "
        f"'name': {_N}.lastIndexOf(':') > {_N}.lastIndexOf('/') ? "
        f"{_N}.substring(0, {_N}.lastIndexOf(':')) : {_N}}})",
    ),
    # The first component, and the rest after it.
    (
        "imageParts",
        f"variables.imageNames.map(e, {{'image': {_I}, 'name': {_N}, "
        f"'first': {_N}.indexOf('/') < 0 ? '' : {_N}.substring(0, {_N}.indexOf('/')), "
        f"'rest': {_N}.substring({_N}.indexOf('/') + 1)}})",
    ),
    # The repository: a first component with '.', ':', upper case, or 'localhost' is a host
    # (lower-cased; index.docker.io is docker.io); otherwise the name is on Docker Hub; a Docker
    # Hub path of one component is an official image, under library/.
    (
        "imageRepositories",
        f"variables.imageParts.map(e, {{'image': {_I}, 'name': {_N}, 'repository': "
        f"({_F} != '' && ({_F}.contains('.') || {_F}.contains(':') || "
        f"{_F} == 'localhost' || {_F}.lowerAscii() != {_F})) ? "
        f"(({_F}.lowerAscii() == '{DOCKER_HUB}' || {_F}.lowerAscii() == "
        f"'{LEGACY_DOCKER_HUB}') ? ({_R}.contains('/') ? '{DOCKER_HUB}/' + {_R} : "
        f"'{DOCKER_HUB}/{OFFICIAL_PREFIX}' + {_R}) : {_F}.lowerAscii() + '/' + {_R}) : "
        f"({_N}.contains('/') ? '{DOCKER_HUB}/' + {_N} : "
        f"'{DOCKER_HUB}/{OFFICIAL_PREFIX}' + {_N})}})",
    ),
)


def _allowed_repository(entries: tuple[str, ...]) -> str:
    """Whether the repository is an entry or below one, by whole components."""
    if not entries:
        return "false"
    repository = "string(e.repository)"
    return " || ".join(
        f"{repository} == {cel_string(entry)} || {repository}.startsWith({cel_string(entry + '/')})"
        for entry in entries
    )


def _refused_images(entries: tuple[str, ...]) -> str:
    reference = f"{_I}.matches(r'{REFERENCE_PATTERN}')"
    return (
        f"variables.imageRepositories.filter(e, !({reference} && "
        f"size({_N}) <= {MAX_NAME_LENGTH} && ({_allowed_repository(entries)})))"
        f".map(e, {_I})"
    )


def registries_in_words(rules: ClusterRules) -> str:
    return ", ".join(rules.allowed_registries) or "none"


def pod_rules(rules: ClusterRules) -> tuple[list[dict], list[dict]]:
    """(variables, validations) of the pods policy."""
    variables = [
        {
            "name": "gpuPod",
            "expression": f"object.spec.containers.exists(c, {_asks_for_gpus()}) || "
            "(has(object.spec.initContainers) && "
            f"object.spec.initContainers.exists(c, {_asks_for_gpus()}))",
        }
    ]
    validations = []
    if rules.gpu_node_selector:
        labels = ", ".join(f"{key}={value}" for key, value in rules.gpu_node_selector)
        validations.append(
            {
                "expression": f"!variables.gpuPod || ({_on_gpu_nodes(rules.gpu_node_selector)})",
                "message": "A pod that asks for GPUs must be placed on GPU nodes: a node "
                f"selector or a required node affinity on {labels}.",
                "reason": "Forbidden",
            }
        )
    if rules.gpu_taint_key:
        taint = cel_string(rules.gpu_taint_key)
        validations += [
            {
                "expression": "!variables.gpuPod || (has(object.spec.tolerations) && "
                f"object.spec.tolerations.exists(t, has(t.key) && t.key == {taint}))",
                "message": "A pod that asks for GPUs must tolerate the GPU taint "
                f"{rules.gpu_taint_key}.",
                "reason": "Forbidden",
            },
            {
                "expression": "variables.gpuPod || !has(object.spec.tolerations) || "
                f"object.spec.tolerations.all(t, !{_tolerates(rules.gpu_taint_key)})",
                "message": "A pod that asks for no GPUs must stay off GPU nodes: it may not "
                f"tolerate the GPU taint {rules.gpu_taint_key} (nor every taint).",
                "reason": "Forbidden",
            },
        ]
    gpu_or_hidden = f"{_asks_for_gpus()} || {_hides_gpus()}"
    validations += [
        {
            "expression": "request.operation != 'CREATE' || !has(object.spec.nodeName) || "
            "object.spec.nodeName == ''",
            "message": "Pods in team namespaces may not set spec.nodeName: the scheduler "
            "places them.",
            "reason": "Forbidden",
        },
        {
            "expression": _each_container(_sets_no_nvidia_variable()),
            "message": "No container may set NVIDIA_* variables (the device plugin sets them "
            "from the GPUs a container asked for), except NVIDIA_VISIBLE_DEVICES=void, which "
            "hides every GPU; envFrom needs a prefix that cannot begin NVIDIA_.",
            "reason": "Forbidden",
        },
        {
            "expression": "!variables.gpuPod || "
            f"({_each_container(gpu_or_hidden, ephemeral=_hides_gpus())})",
            "message": "In a pod that asks for GPUs, every container that asks for none must "
            "set NVIDIA_VISIBLE_DEVICES=void, or it would see every GPU of the node.",
            "reason": "Forbidden",
        },
    ]
    if not rules.allow_all_registries:
        steps = [*_IMAGE_STEPS, ("refusedImages", _refused_images(rules.allowed_registries))]
        variables += [{"name": name, "expression": expression} for name, expression in steps]
        allowed = registries_in_words(rules)
        validations.append(
            {
                "expression": "size(variables.refusedImages) == 0",
                "messageExpression": cel_string(
                    f"Images must come from the registries this cluster allows ({allowed}): "
                )
                + " + variables.refusedImages.join(', ')",
                "reason": "Forbidden",
            }
        )
    return variables, validations


# --- objects -----------------------------------------------------------------------------------


def _labels(rules: ClusterRules) -> dict[str, str]:
    return {MANAGED_BY_LABEL: rules.portal_name}


def _policy(rules: ClusterRules, name: str, *, resources: list[str], spec: dict) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": _labels(rules)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": resources,
                    }
                ]
            },
            **spec,
        },
    }


def _binding(rules: ClusterRules, name: str) -> dict:
    """Bound to every namespace the portal manages (by its label, which only the portal sets:
    members cannot change namespaces)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": _labels(rules)},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {MANAGED_BY_LABEL: rules.portal_name}}
            },
        },
    }


def pods_policy(rules: ClusterRules) -> dict:
    variables, validations = pod_rules(rules)
    return _policy(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_PODS),
        resources=["pods", "pods/ephemeralcontainers"],
        spec={
            # A pod's spec changes only through its few mutable fields (images, tolerations,
            # ephemeral containers); updates of its metadata or status need no check.
            "matchConditions": [
                {
                    "name": "spec-written",
                    "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec",
                }
            ],
            "variables": variables,
            "validations": validations,
        },
    )


def secrets_policy(rules: ClusterRules) -> dict:
    return _policy(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_SECRETS),
        resources=["secrets"],
        spec={
            "validations": [
                {
                    "expression": "!has(object.type) || "
                    f"object.type != {cel_string(SERVICE_ACCOUNT_TOKEN)}",
                    "message": "Service-account token Secrets are not allowed in team "
                    "namespaces: access there follows team membership only.",
                    "reason": "Forbidden",
                }
            ]
        },
    )


def admission_objects(rules: ClusterRules) -> list[dict]:
    """The policies and their bindings, each policy before its binding."""
    objects = []
    for policy in (pods_policy(rules), secrets_policy(rules)):
        objects += [policy, _binding(rules, policy["metadata"]["name"])]
    return [manifests.with_hash(obj) for obj in objects]
