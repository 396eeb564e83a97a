"""Kueue mode: GPU work names one of the team's LocalQueues, and a priority only of that queue
(the pods, jobs and queued-templates policies hold it)."""

from __future__ import annotations

from clusters.vocabulary import (
    GUARANTEED,
    KUEUE_PRIORITY_CLASS_LABEL,
    KUEUE_QUEUE_LABEL,
    LOCAL_QUEUES,
    OPPORTUNISTIC,
    PROTECTED_BORROWER,
    priority_class_name,
)
from reconcile.admission_policies.cel import cel_list, cel_string, label
from reconcile.admission_policies.rules import ClusterRules

# The priority classes work in each queue may carry: a protected borrower's is opportunistic
# work's within its minimum run time (``reconcile.queue_manifests``).
QUEUE_CLASSES = {GUARANTEED: (GUARANTEED,), OPPORTUNISTIC: (OPPORTUNISTIC, PROTECTED_BORROWER)}


def queue_validations(rules: ClusterRules, obj: str, what: str) -> list[dict]:
    """``obj`` (a pod, or a pod template) names one of the team's LocalQueues, and a priority
    label only of that queue."""
    queue = label(obj, KUEUE_QUEUE_LABEL)
    priority = label(obj, KUEUE_PRIORITY_CLASS_LABEL)
    classes = " || ".join(
        f"({queue} == {cel_string(kind)} && {priority} in "
        f"{cel_list([priority_class_name(rules.portal_name, c) for c in QUEUE_CLASSES[kind]])})"
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
                " or =".join(priority_class_name(rules.portal_name, c) for c in QUEUE_CLASSES[kind])
                + f" in the {kind} queue"
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
