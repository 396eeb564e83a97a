"""``<portal>-team-routes``: Ingress hosts and HTTPRoute hostnames under the team's own domain."""

from __future__ import annotations

from clusters.vocabulary import ADMISSION_POLICY_ROUTES, admission_policy_name
from reconcile.admission_policies.cel import cel_string
from reconcile.admission_policies.objects import policy_object, resource_rule
from reconcile.admission_policies.rules import ClusterRules


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
    return policy_object(
        rules,
        admission_policy_name(rules.portal_name, ADMISSION_POLICY_ROUTES),
        resource_rules=[
            resource_rule("networking.k8s.io", "v1", ["ingresses"]),
            resource_rule("gateway.networking.k8s.io", "*", ["httproutes"]),
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
