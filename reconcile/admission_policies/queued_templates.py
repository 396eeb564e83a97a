"""``<portal>-team-queued-templates`` (Kueue mode): the GPU pod templates of Deployments,
StatefulSets, ReplicaSets and ReplicationControllers name one of the team's queues."""

from __future__ import annotations

from clusters.vocabulary import ADMISSION_POLICY_QUEUED_TEMPLATES, admission_policy_name
from reconcile.admission_policies.cel import template_asks_for_gpus
from reconcile.admission_policies.objects import policy_object, resource_rule
from reconcile.admission_policies.queues import queue_validations
from reconcile.admission_policies.rules import ClusterRules


def queued_templates_policy(rules: ClusterRules) -> dict:
    """Kueue mode: the GPU pods of Deployments, StatefulSets, ReplicaSets and
    ReplicationControllers are labelled with one of the team's queues, so that Kueue's pod
    integration holds each until it admits it."""
    template = "object.spec.template"
    return policy_object(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_QUEUED_TEMPLATES),
        resource_rules=[
            resource_rule("apps", "v1", ["deployments", "statefulsets", "replicasets"]),
            resource_rule("", "v1", ["replicationcontrollers"]),
        ],
        spec={
            # Scaling, and the controllers' own bookkeeping, leave the template alone.
            "matchConditions": [
                {
                    "name": "asks-for-gpus",
                    "expression": f"has({template}) && has({template}.spec) && "
                    f"({template_asks_for_gpus(template + '.spec')})",
                },
                {
                    "name": "template-written",
                    "expression": "request.operation == 'CREATE' || "
                    "object.spec.template != oldObject.spec.template",
                },
            ],
            "validations": queue_validations(rules, template, "label the pod template"),
        },
    )
