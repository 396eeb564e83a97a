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

* no pod may name a ``priorityClassName`` outside the cluster's allowed list (empty by
  default: a ``system-*`` class would let a team's pods preempt anyone's);
* in Kueue mode, every pod that asks for GPUs is Kueue's: either a batch Job's pod, created by
  the Job controller (the Job itself held in the queue by ``<portal>-team-jobs``), or a
  pod Kueue's pod integration queued (labelled with one of the team's LocalQueues and held by
  Kueue's scheduling gate, which only Kueue may lift); its priority label, if any, is its
  queue's.

``<portal>-team-services``: Services stay inside the cluster (no NodePort or LoadBalancer type,
no externalIPs) unless a portal admin allowed the team otherwise (``Team.
external_services_allowed``, which the portal writes as a label on the team's namespaces).

``<portal>-team-routes``: Ingress hosts and HTTPRoute hostnames are under the team's own domain
(``<team>.<apps domain>``, the cluster's ``apps_domain``), never missing (a catch-all), no
Ingress default backend, no configuration-snippet annotations.

``<portal>-team-secrets``: no Secret of type ``kubernetes.io/service-account-token`` (a lasting
token for a service account, which Kubernetes fills in for whoever creates the Secret).

In Kueue mode only, two more keep every GPU workload in the team's queues:

``<portal>-team-jobs``, on every batch Job whose pods ask for GPUs: it names one of the
team's LocalQueues (``kueue.x-k8s.io/queue-name``), a priority label only of that queue, is
created suspended (Kueue's own webhook suspends it) and only Kueue un-suspends it, when it
admits it.

``<portal>-team-queued-templates``, on Deployments, StatefulSets, ReplicaSets and
ReplicationControllers whose pods ask for GPUs: the pod template names one of the team's
LocalQueues, so Kueue's pod integration queues each pod (and the pod rule above refuses it
otherwise, with the same words, when the controller tries to make it).

Why an admission policy rather than Kueue's ``manageJobsWithoutQueueName``: that setting would
queue every pod of a team namespace, those that ask for no GPU too, and a workload Kueue does
not integrate would still slip past; the policy refuses exactly the GPU work that bypasses the
queue, at the API server, with a message that says how to submit it.

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
    ADMISSION_POLICY_JOBS,
    ADMISSION_POLICY_PODS,
    ADMISSION_POLICY_QUEUED_TEMPLATES,
    ADMISSION_POLICY_ROUTES,
    ADMISSION_POLICY_SECRETS,
    ADMISSION_POLICY_SERVICES,
    DEFAULT_APPS_DOMAIN,
    EXTERNAL_SERVICES_ALLOWED,
    EXTERNAL_SERVICES_LABEL,
    GPU_RESOURCE_PREFIXES,
    JOB_CONTROLLER_USERS,
    KUEUE_ADMISSION_GATE,
    KUEUE_MANAGER_USER,
    KUEUE_PRIORITY_CLASS_LABEL,
    KUEUE_QUEUE_LABEL,
    LOCAL_QUEUES,
    MANAGED_BY_LABEL,
    MAX_RUNTIME_SECONDS,
    NO_GPUS,
    NVIDIA_ENV_PREFIX,
    NVIDIA_VISIBLE_DEVICES,
    RUNTIME_ANNOTATION_PREFIXES,
    admission_policy_name,
    priority_class_name,
)
from tenants import manifests

API_VERSION = "admissionregistration.k8s.io/v1"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
HIDE_GPUS = (NVIDIA_VISIBLE_DEVICES, NO_GPUS)
NVIDIA_PREFIX = NVIDIA_ENV_PREFIX
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# The volume kinds Pod Security's restricted level allows (the rest of that level is left to the
# namespace's own Pod Security level, so images that run as root keep working under baseline).
ALLOWED_VOLUME_TYPES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)


@dataclass(frozen=True)
class ClusterRules:
    """What the policies depend on: the cluster's GPU placement and its allowed registries
    (normalised entries, ``clusters.image_references.registry_entries``)."""

    portal_name: str
    gpu_node_selector: tuple[tuple[str, str], ...] = ()
    gpu_taint_key: str = ""
    allowed_registries: tuple[str, ...] = ()
    allow_all_registries: bool = False
    allowed_priority_classes: tuple[str, ...] = ()
    apps_domain: str = DEFAULT_APPS_DOMAIN
    kueue: bool = False  # the cluster's quota is Kueue's: GPU work goes through its queues
    portal_url: str = ""  # where the refusals send members to submit instead


def cluster_rules(
    *,
    portal_name: str,
    gpu_node_selector: dict[str, str] | None = None,
    gpu_taint_key: str = "",
    allowed_registries: Iterable[str] = (),
    allow_all_registries: bool = False,
    allowed_priority_classes: Iterable[str] = (),
    apps_domain: str = DEFAULT_APPS_DOMAIN,
    kueue: bool = False,
    portal_url: str = "",
) -> ClusterRules:
    return ClusterRules(
        portal_name=portal_name,
        gpu_node_selector=tuple(sorted((gpu_node_selector or {}).items())),
        gpu_taint_key=gpu_taint_key,
        allowed_registries=tuple(allowed_registries),
        allow_all_registries=allow_all_registries,
        allowed_priority_classes=tuple(sorted(set(allowed_priority_classes))),
        apps_domain=apps_domain,
        kueue=kueue,
        portal_url=portal_url,
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


def cel_list(values: Iterable[str]) -> str:
    """A CEL list literal of strings."""
    return "[" + ", ".join(cel_string(value) for value in values) + "]"


def _label(obj: str, key: str) -> str:
    """The value of label ``key`` of ``obj`` (CEL over its metadata), "" when it has none."""
    return (
        f"(has({obj}.metadata) && has({obj}.metadata.labels) && "
        f"{cel_string(key)} in {obj}.metadata.labels ? "
        f"{obj}.metadata.labels[{cel_string(key)}] : '')"
    )


def _template_asks_for_gpus(spec: str) -> str:
    """Whether a pod spec (CEL path) has a container or init container that asks for GPUs."""
    return (
        f"{spec}.containers.exists(c, {_asks_for_gpus()}) || "
        f"(has({spec}.initContainers) && {spec}.initContainers.exists(c, {_asks_for_gpus()}))"
    )


def _queue_validations(rules: ClusterRules, obj: str, what: str) -> list[dict]:
    """``obj`` (a pod, or a pod template) names one of the team's LocalQueues, and a priority
    label only of that queue."""
    queue = _label(obj, KUEUE_QUEUE_LABEL)
    priority = _label(obj, KUEUE_PRIORITY_CLASS_LABEL)
    classes = " || ".join(
        f"({queue} == {cel_string(kind)} && {priority} == "
        f"{cel_string(priority_class_name(rules.portal_name, kind))})"
        for kind in LOCAL_QUEUES
    )
    return [
        {
            "expression": f"{queue} in {cel_list(LOCAL_QUEUES)}",
            "message": queue_refusal(rules, what),
            "reason": "Forbidden",
        },
        {
            "expression": f"{priority} == '' || {classes}",
            "message": f"The priority of queued work is its queue's: {KUEUE_PRIORITY_CLASS_LABEL}="
            + ", =".join(
                f"{priority_class_name(rules.portal_name, kind)} in the {kind} queue"
                for kind in LOCAL_QUEUES
            )
            + ", or none.",
            "reason": "Forbidden",
        },
    ]


def queue_refusal(rules: ClusterRules, what: str) -> str:
    """What a member reads when GPU work would go around the team's queues."""
    where = f" The portal submits jobs and services for you: {rules.portal_url}." * bool(
        rules.portal_url
    )
    queues = " or ".join(f"{KUEUE_QUEUE_LABEL}={kind}" for kind in LOCAL_QUEUES)
    return (
        f"On this cluster Kueue admits every GPU workload through the team's queues: {what} "
        f"{queues} (guaranteed runs within the team's quota and is never preempted; "
        f"opportunistic borrows idle GPUs and may be preempted).{where}"
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
    validations += [
        {
            "expression": "!has(object.spec.volumes) || object.spec.volumes.all(v, "
            + " || ".join(f"has(v.{kind})" for kind in ALLOWED_VOLUME_TYPES)
            + ")",
            "message": "Volumes in team namespaces are of the kinds Pod Security's restricted "
            f"level allows: {', '.join(ALLOWED_VOLUME_TYPES)} (a PersistentVolumeClaim for "
            "network storage: no inline NFS, iSCSI, RBD, CephFS and the like).",
            "reason": "Forbidden",
        },
        {
            "expression": "!has(object.metadata.annotations) || "
            "object.metadata.annotations.all(k, "
            + " && ".join(f"!k.startsWith({cel_string(p)})" for p in RUNTIME_ANNOTATION_PREFIXES)
            + ")",
            "message": "Pods in team namespaces may not carry container-runtime or device "
            f"annotations ({', '.join(p + '*' for p in RUNTIME_ANNOTATION_PREFIXES)}): GPUs "
            "and devices come only from the resources a container asks for.",
            "reason": "Forbidden",
        },
        {
            # A controller's pods (a Job's, a Deployment's) run as long as it says; a pod of its
            # own asking for GPUs needs a deadline, as a Job does (a pod's deadline may only be
            # lowered afterwards).
            **_runtime_validation("object.spec.activeDeadlineSeconds"),
            "expression": "request.operation != 'CREATE' || !variables.gpuPod || "
            "(has(object.metadata.ownerReferences) && "
            "object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller)) || "
            + _runtime_validation("object.spec.activeDeadlineSeconds")["expression"],
        },
    ]
    allowed_classes = rules.allowed_priority_classes
    validations.append(
        {
            "expression": "!has(object.spec.priorityClassName) || "
            f"object.spec.priorityClassName == '' || "
            f"object.spec.priorityClassName in {cel_list(allowed_classes)}",
            "message": "Pods in team namespaces may not name a priorityClassName"
            + (f" other than {', '.join(allowed_classes)}" if allowed_classes else "")
            + ": the queue decides what runs first.",
            "reason": "Forbidden",
        }
    )
    if rules.kueue:
        queued_variables, queued_validations = _queued_pod_rules(rules)
        variables += queued_variables
        validations += queued_validations
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


def _gated(obj: str) -> str:
    return (
        f"(has({obj}.spec.schedulingGates) && "
        f"{obj}.spec.schedulingGates.exists(g, g.name == {cel_string(KUEUE_ADMISSION_GATE)}))"
    )


def _queued_pod_rules(rules: ClusterRules) -> tuple[list[dict], list[dict]]:
    """(variables, validations) that keep a Kueue cluster's GPU pods Kueue's."""
    variables = [
        {
            "name": "jobControllersPod",
            "expression": f"request.userInfo.username in {cel_list(JOB_CONTROLLER_USERS)} && "
            "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
            "o.apiVersion == 'batch/v1' && o.kind == 'Job' && has(o.controller) && o.controller)",
        },
        {"name": "kueueGated", "expression": _gated("object")},
    ]
    queue_validation, priority_validation = _queue_validations(
        rules, "object", "label the pod (or the pod template of its Deployment)"
    )
    queued = queue_validation["expression"]
    validations = [
        {
            "expression": "request.operation != 'CREATE' || !variables.gpuPod || "
            f"variables.jobControllersPod || (variables.kueueGated && {queued})",
            "message": queue_validation["message"].replace(
                "label the pod (or the pod template of its Deployment)",
                "run it as a Job, or label the pod (or the pod template of its Deployment)",
            ),
            "reason": "Forbidden",
        },
        {
            "expression": f"request.operation != 'UPDATE' || !{_gated('oldObject')} || "
            "variables.kueueGated || "
            f"request.userInfo.username == {cel_string(KUEUE_MANAGER_USER)}",
            "message": f"Only Kueue lifts a queued pod's {KUEUE_ADMISSION_GATE} gate, when it "
            "admits the pod.",
            "reason": "Forbidden",
        },
        {
            **priority_validation,
            "expression": f"!variables.gpuPod || {priority_validation['expression']}",
        },
    ]
    return variables, validations


# --- objects -----------------------------------------------------------------------------------


def _labels(rules: ClusterRules) -> dict[str, str]:
    return {MANAGED_BY_LABEL: rules.portal_name}


def _policy(
    rules: ClusterRules,
    name: str,
    *,
    resources: list[str] | None = None,
    resource_rules: list[dict] | None = None,
    spec: dict,
) -> dict:
    """A policy on CREATE and UPDATE of ``resources`` (core v1), or of ``resource_rules``."""
    if resource_rules is None:
        resource_rules = [_resource_rule("", "v1", resources or [])]
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": _labels(rules)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": resource_rules},
            **spec,
        },
    }


def _resource_rule(group: str, version: str, resources: list[str]) -> dict:
    return {
        "apiGroups": [group],
        "apiVersions": [version],
        "operations": ["CREATE", "UPDATE"],
        "resources": resources,
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


def _queue_labels_changed() -> str:
    return " || ".join(
        f"{_label('object', key)} != {_label('oldObject', key)}"
        for key in (KUEUE_QUEUE_LABEL, KUEUE_PRIORITY_CLASS_LABEL)
    )


def _runtime_validation(deadline: str) -> dict:
    """``deadline`` (a CEL path to an ``activeDeadlineSeconds``) is set, within the maximum."""
    return {
        "expression": f"(has({deadline}) && {deadline} <= {MAX_RUNTIME_SECONDS})",
        "message": f"GPU work has a maximum run time: set {deadline.removeprefix('object.')} "
        f"(at most {MAX_RUNTIME_SECONDS} seconds, {MAX_RUNTIME_SECONDS // 86400} days).",
        "reason": "Forbidden",
    }


def jobs_policy(rules: ClusterRules) -> dict:
    """A GPU Job has a maximum run time; in Kueue mode it waits in one of the team's queues
    until Kueue admits it."""
    suspended = "(has(object.spec.suspend) && object.spec.suspend)"
    was_suspended = "(has(oldObject.spec.suspend) && oldObject.spec.suspend)"
    deadline = _runtime_validation("object.spec.activeDeadlineSeconds")
    # A Job made before the policy, without a deadline, may still change (Kueue admitting it);
    # one with a deadline keeps one.
    had_deadline = "has(oldObject.spec.activeDeadlineSeconds)"
    validations = [
        {
            **deadline,
            "expression": f"(request.operation == 'UPDATE' && !{had_deadline}) || "
            + deadline["expression"],
        }
    ]
    if rules.kueue:
        validations += [
            *_queue_validations(rules, "object", "label the Job"),
            {
                "expression": f"request.operation != 'CREATE' || {suspended}",
                "message": "A queued Job starts suspended, and Kueue un-suspends it when it "
                "admits it (Kueue did not suspend this one: is it running?).",
                "reason": "Forbidden",
            },
            {
                "expression": f"request.operation != 'UPDATE' || !{was_suspended} || "
                f"{suspended} || "
                f"request.userInfo.username == {cel_string(KUEUE_MANAGER_USER)}",
                "message": "Only Kueue un-suspends a queued Job, when it admits it.",
                "reason": "Forbidden",
            },
        ]
    return _policy(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_JOBS),
        resource_rules=[_resource_rule("batch", "v1", ["jobs"])],
        spec={
            # Only GPU Jobs, and of their updates only those that change the spec or the queue
            # labels: the garbage collector's finalizers on a Job from before pass.
            "matchConditions": [
                {
                    "name": "asks-for-gpus",
                    "expression": _template_asks_for_gpus("object.spec.template.spec"),
                },
                {
                    "name": "spec-or-queue-written",
                    "expression": "request.operation == 'CREATE' || "
                    f"object.spec != oldObject.spec || {_queue_labels_changed()}",
                },
            ],
            "validations": validations,
        },
    )


def queued_templates_policy(rules: ClusterRules) -> dict:
    """Kueue mode: the GPU pods of Deployments, StatefulSets, ReplicaSets and
    ReplicationControllers are labelled with one of the team's queues, so that Kueue's pod
    integration holds each until it admits it."""
    template = "object.spec.template"
    return _policy(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_QUEUED_TEMPLATES),
        resource_rules=[
            _resource_rule("apps", "v1", ["deployments", "statefulsets", "replicasets"]),
            _resource_rule("", "v1", ["replicationcontrollers"]),
        ],
        spec={
            # Scaling, and the controllers' own bookkeeping, leave the template alone.
            "matchConditions": [
                {
                    "name": "asks-for-gpus",
                    "expression": f"has({template}) && has({template}.spec) && "
                    f"({_template_asks_for_gpus(template + '.spec')})",
                },
                {
                    "name": "template-written",
                    "expression": "request.operation == 'CREATE' || "
                    "object.spec.template != oldObject.spec.template",
                },
            ],
            "validations": _queue_validations(rules, template, "label the pod template"),
        },
    )


def services_policy(rules: ClusterRules) -> dict:
    """Services stay inside the cluster (ClusterIP, or a DNS name), unless an admin allowed
    the team otherwise (its namespace's label, which only the portal sets)."""
    label = cel_string(EXTERNAL_SERVICES_LABEL)
    allowed = (
        "has(namespaceObject.metadata.labels) && "
        f"{label} in namespaceObject.metadata.labels && "
        f"namespaceObject.metadata.labels[{label}] == {cel_string(EXTERNAL_SERVICES_ALLOWED)}"
    )
    inside = (
        "(!has(object.spec.type) || object.spec.type == 'ClusterIP' || "
        "object.spec.type == 'ExternalName') && "
        "(!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0)"
    )
    return _policy(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_SERVICES),
        resources=["services"],
        spec={
            "validations": [
                {
                    "expression": f"({allowed}) || ({inside})",
                    "message": "Services in team namespaces stay inside the cluster: no "
                    "NodePort or LoadBalancer type and no externalIPs, unless a portal admin "
                    "allows them for the team.",
                    "reason": "Forbidden",
                }
            ]
        },
    )


def _in_team_domain(host: str, domain: str) -> str:
    """CEL: ``host`` is the team's domain or a name (or wildcard) under it; the team is the
    namespace's name."""
    return f"({host} == {domain} || {host}.endsWith('.' + {domain}))"


def routes_policy(rules: ClusterRules) -> dict:
    """HTTP routes stay in the team's own domain: every Ingress rule and HTTPRoute names hosts
    under ``<team>.<apps domain>`` (none: a catch-all that would take every team's traffic on
    a shared ingress or gateway), no default backend, and no configuration snippets (raw
    proxy configuration, which reaches past the team's own routes)."""
    domain = f"(namespaceObject.metadata.name + '.' + {cel_string(rules.apps_domain)})"
    where = f"<namespace>.{rules.apps_domain}"
    ingress_hosts = (
        "has(object.spec.rules) && size(object.spec.rules) > 0 && object.spec.rules.all(r, "
        f"has(r.host) && {_in_team_domain('r.host', domain)})"
    )
    route_hosts = (
        "has(object.spec.hostnames) && size(object.spec.hostnames) > 0 && "
        f"object.spec.hostnames.all(h, {_in_team_domain('h', domain)})"
    )
    ingress = "request.resource.resource == 'ingresses'"
    return _policy(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_ROUTES),
        resource_rules=[
            _resource_rule("networking.k8s.io", "v1", ["ingresses"]),
            _resource_rule("gateway.networking.k8s.io", "*", ["httproutes"]),
        ],
        spec={
            "validations": [
                {
                    "expression": f"!({ingress}) || ({ingress_hosts} && "
                    "!has(object.spec.defaultBackend))",
                    "message": "An Ingress in a team namespace names its hosts, each under the "
                    f"team's domain ({where}), and has no default backend.",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"{ingress} || ({route_hosts})",
                    "message": "An HTTPRoute in a team namespace names its hostnames, each "
                    f"under the team's domain ({where}).",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!has(object.metadata.annotations) || "
                    "object.metadata.annotations.all(k, !k.lowerAscii().contains('snippet'))",
                    "message": "Routes in team namespaces may not carry configuration snippets "
                    "(raw proxy configuration reaches past the team's own routes).",
                    "reason": "Forbidden",
                },
            ]
        },
    )


def admission_objects(rules: ClusterRules) -> list[dict]:
    """The policies and their bindings, each policy before its binding."""
    objects = []
    policies = [
        pods_policy(rules),
        secrets_policy(rules),
        jobs_policy(rules),
        services_policy(rules),
        routes_policy(rules),
    ]
    if rules.kueue:
        policies.append(queued_templates_policy(rules))
    for policy in policies:
        objects += [policy, _binding(rules, policy["metadata"]["name"])]
    return [manifests.with_hash(obj) for obj in objects]
