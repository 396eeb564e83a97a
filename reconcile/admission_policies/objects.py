"""The shapes of the objects: a ValidatingAdmissionPolicy on CREATE and UPDATE of some
resources, and its binding to every namespace the portal manages."""

from __future__ import annotations

from clusters.vocabulary import MANAGED_BY_LABEL
from reconcile.admission_policies.rules import ClusterRules

API_VERSION = "admissionregistration.k8s.io/v1"


def _labels(rules: ClusterRules) -> dict[str, str]:
    return {MANAGED_BY_LABEL: rules.portal_name}


def policy_object(
    rules: ClusterRules,
    name: str,
    *,
    resources: list[str] | None = None,
    resource_rules: list[dict] | None = None,
    spec: dict,
) -> dict:
    """A policy on CREATE and UPDATE of ``resources`` (core v1), or of ``resource_rules``."""
    if resource_rules is None:
        resource_rules = [resource_rule("", "v1", resources or [])]
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


def resource_rule(group: str, version: str, resources: list[str]) -> dict:
    return {
        "apiGroups": [group],
        "apiVersions": [version],
        "operations": ["CREATE", "UPDATE"],
        "resources": resources,
    }


def binding_object(rules: ClusterRules, name: str) -> dict:
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
