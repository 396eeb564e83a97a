"""``<portal>-team-pods``: where a pod runs, what it may see of the GPUs, its volumes,
annotations, run time, priority and images, and in Kueue mode that its GPUs come through the
team's queues."""

from __future__ import annotations

from clusters.vocabulary import (
    ADMISSION_POLICY_PODS,
    JOB_CONTROLLER_USERS,
    KUEUE_ADMISSION_GATE,
    KUEUE_MANAGER_USER,
    NO_GPUS,
    NVIDIA_ENV_PREFIX,
    NVIDIA_VISIBLE_DEVICES,
    RUNTIME_ANNOTATION_PREFIXES,
    admission_policy_name,
)
from reconcile.admission_policies.cel import (
    CONTAINER_LISTS,
    asks_for_gpus,
    cel_list,
    cel_string,
    runtime_validation,
)
from reconcile.admission_policies.images import image_rules
from reconcile.admission_policies.objects import policy_object
from reconcile.admission_policies.queues import queue_validations
from reconcile.admission_policies.rules import ClusterRules

HIDE_GPUS = (NVIDIA_VISIBLE_DEVICES, NO_GPUS)
NVIDIA_PREFIX = NVIDIA_ENV_PREFIX
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


def _each_container(predicate: str, *, ephemeral: str | None = None) -> str:
    """``predicate`` (over ``c``) holds for every container of the pod, of every list
    (``ephemeral`` in its place for ephemeral containers, which have no resources)."""
    checks = []
    for field in CONTAINER_LISTS:
        check = ephemeral if field == "ephemeralContainers" and ephemeral else predicate
        every = f"object.spec.{field}.all(c, {check})"
        checks.append(every if field == "containers" else f"(!has(object.spec.{field}) || {every})")
    return " && ".join(checks)


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


def pod_rules(rules: ClusterRules) -> tuple[list[dict], list[dict]]:
    """(variables, validations) of the pods policy."""
    variables = [
        {
            "name": "gpuPod",
            "expression": f"object.spec.containers.exists(c, {asks_for_gpus()}) || "
            "(has(object.spec.initContainers) && "
            f"object.spec.initContainers.exists(c, {asks_for_gpus()}))",
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
    gpu_or_hidden = f"{asks_for_gpus()} || {_hides_gpus()}"
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
            **runtime_validation("object.spec.activeDeadlineSeconds"),
            "expression": "request.operation != 'CREATE' || !variables.gpuPod || "
            "(has(object.metadata.ownerReferences) && "
            "object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller)) || "
            + runtime_validation("object.spec.activeDeadlineSeconds")["expression"],
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
    image_variables, image_validations = image_rules(rules)
    variables += image_variables
    validations += image_validations
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
    queue_validation, priority_validation = queue_validations(
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


def pods_policy(rules: ClusterRules) -> dict:
    variables, validations = pod_rules(rules)
    return policy_object(
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
