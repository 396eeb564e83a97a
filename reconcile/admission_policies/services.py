"""``<portal>-team-services``: Services stay inside the cluster unless an admin allowed the
team otherwise."""

from __future__ import annotations

from clusters.vocabulary import (
    ADMISSION_POLICY_SERVICES,
    EXTERNAL_SERVICES_ALLOWED,
    EXTERNAL_SERVICES_LABEL,
    admission_policy_name,
)
from reconcile.admission_policies.cel import cel_string
from reconcile.admission_policies.objects import policy_object
from reconcile.admission_policies.rules import ClusterRules


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
    return policy_object(
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
