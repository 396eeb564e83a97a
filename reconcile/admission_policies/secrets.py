"""``<portal>-team-secrets``: no service-account token Secrets."""

from __future__ import annotations

from clusters.vocabulary import ADMISSION_POLICY_SECRETS, admission_policy_name
from reconcile.admission_policies.cel import cel_string
from reconcile.admission_policies.objects import policy_object
from reconcile.admission_policies.rules import ClusterRules

SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"


def secrets_policy(rules: ClusterRules) -> dict:
    return policy_object(
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
