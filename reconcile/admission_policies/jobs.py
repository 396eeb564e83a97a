"""``<portal>-team-jobs``: a GPU Job has a maximum run time; in Kueue mode it waits in one of
the team's queues until Kueue admits it."""

from __future__ import annotations

from clusters.vocabulary import (
    ADMISSION_POLICY_JOBS,
    KUEUE_MANAGER_USER,
    KUEUE_PRIORITY_CLASS_LABEL,
    KUEUE_QUEUE_LABEL,
    PROTECTED_BORROWER,
    admission_policy_name,
    priority_class_name,
)
from reconcile.admission_policies.cel import (
    cel_string,
    label,
    runtime_validation,
    template_asks_for_gpus,
)
from reconcile.admission_policies.objects import policy_object, resource_rule
from reconcile.admission_policies.queues import queue_validations
from reconcile.admission_policies.rules import ClusterRules


def _queue_labels_changed() -> str:
    return " || ".join(
        f"{label('object', key)} != {label('oldObject', key)}"
        for key in (KUEUE_QUEUE_LABEL, KUEUE_PRIORITY_CLASS_LABEL)
    )


def _no_protection_raised(rules: ClusterRules) -> dict:
    """A Job starts protected from preemption or never is: the portal lowers a protected
    borrower's priority once its minimum run time is up, and nobody may raise it back."""
    name = priority_class_name(rules.portal_name, PROTECTED_BORROWER)
    protected, priority = cel_string(name), KUEUE_PRIORITY_CLASS_LABEL
    return {
        "expression": f"request.operation != 'UPDATE' || {label('object', priority)} != "
        f"{protected} || {label('oldObject', priority)} == {protected}",
        "message": f"A Job is protected from preemption ({priority}={name}) from its "
        "creation only, for the cluster's minimum run time.",
        "reason": "Forbidden",
    }


def jobs_policy(rules: ClusterRules) -> dict:
    """A GPU Job has a maximum run time; in Kueue mode it waits in one of the team's queues
    until Kueue admits it."""
    suspended = "(has(object.spec.suspend) && object.spec.suspend)"
    was_suspended = "(has(oldObject.spec.suspend) && oldObject.spec.suspend)"
    deadline = runtime_validation("object.spec.activeDeadlineSeconds")
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
            *queue_validations(rules, "object", "label the Job"),
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
            _no_protection_raised(rules),
        ]
    return policy_object(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_JOBS),
        resource_rules=[resource_rule("batch", "v1", ["jobs"])],
        spec={
            # Only GPU Jobs, and of their updates only those that change the spec or the queue
            # labels: the garbage collector's finalizers on a Job from before pass.
            "matchConditions": [
                {
                    "name": "asks-for-gpus",
                    "expression": template_asks_for_gpus("object.spec.template.spec"),
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
