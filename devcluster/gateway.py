"""A gateway that serves the Gateway API's HTTPRoutes for real: Traefik (built from its Go
module, ``builder.TOOL_BUILDS``), running on the host beside the control plane.

It watches the GatewayClass ``traefik`` and its Gateway ``gateway-system/devcluster`` (one HTTP
listener on ``PORT``, taking routes from every namespace) through the API server, and proxies
each attached HTTPRoute's requests to its backend Services' ready endpoints, by the backends'
weights: pods of the real node, whose subnet the host routes to (the kwok nodes' pods have
addresses nothing answers on). The portal attaches its inference services' routes to it with
``SERVING_GATEWAY=gateway-system/devcluster``.

Traefik acts as a user of its own (``IDENTITY``) bound to a ClusterRole with what its Gateway
API provider reads and the statuses it writes, not as the cluster's admin. Started on demand
(``start``: the ``gateway`` test fixture), stopped with the cluster; like the real node, on
instance 1 only.
"""

from __future__ import annotations

import yaml
from kubernetes import client

from devcluster import builder, credentials, processes
from devcluster.components import Component, _http_ok
from devcluster.kueue import apply
from devcluster.settings import Settings

GATEWAY_CLASS = "traefik"
CONTROLLER = "traefik.io/gateway-controller"
NAMESPACE = "gateway-system"
NAME = "devcluster"
REFERENCE = f"{NAMESPACE}/{NAME}"
PORT = 27080  # the listener's, and Traefik's entry point's (Traefik matches them by port)
PING_PORT = 27081
IDENTITY = "devcluster:gateway"


class GatewayUnavailable(RuntimeError):
    """The gateway cannot run here; the message says why."""


def directory(settings: Settings):
    return settings.state_dir / "gateway"


def static_config() -> dict:
    return {
        "global": {"checkNewVersion": False, "sendAnonymousUsage": False},
        "entryPoints": {
            "web": {"address": f"127.0.0.1:{PORT}"},
            "ping": {"address": f"127.0.0.1:{PING_PORT}"},
        },
        "ping": {"entryPoint": "ping"},
        "providers": {"kubernetesGateway": {"throttleDuration": "1s"}},
        "log": {"level": "INFO"},
    }


def objects() -> list[dict]:
    """What the cluster's admin applies for the gateway: its RBAC, class and Gateway."""
    gateway_api = "gateway.networking.k8s.io"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "devcluster-gateway"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["namespaces", "services", "secrets", "configmaps"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": [gateway_api],
                    "resources": [
                        "gatewayclasses",
                        "gateways",
                        "httproutes",
                        "grpcroutes",
                        "referencegrants",
                        "backendtlspolicies",
                        "listenersets",
                        "tcproutes",
                        "tlsroutes",
                    ],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": [gateway_api],
                    "resources": [
                        "gatewayclasses/status",
                        "gateways/status",
                        "httproutes/status",
                        "grpcroutes/status",
                        "backendtlspolicies/status",
                        "listenersets/status",
                    ],
                    "verbs": ["update", "patch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "devcluster-gateway"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "devcluster-gateway",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": IDENTITY}
            ],
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": f"{gateway_api}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": CONTROLLER},
        },
        {
            "apiVersion": f"{gateway_api}/v1",
            "kind": "Gateway",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "gatewayClassName": GATEWAY_CLASS,
                "listeners": [
                    {
                        "name": "http",
                        "protocol": "HTTP",
                        "port": PORT,
                        "allowedRoutes": {"namespaces": {"from": "All"}},
                    }
                ],
            },
        },
    ]


def _command(s: Settings) -> list[str]:
    return [str(builder.binary("traefik")), f"--configFile={directory(s) / 'traefik.yaml'}"]


def _env(s: Settings) -> dict[str, str]:
    return {"KUBECONFIG": str(directory(s) / "gateway.kubeconfig"), "PATH": "/usr/bin:/bin"}


COMPONENT = Component(
    "gateway",
    "traefik --configFile",
    _command,
    lambda s: _http_ok(f"http://127.0.0.1:{PING_PORT}/ping"),
    env=_env,
)


def running(settings: Settings) -> bool:
    pid = processes.running_pid(settings.run_dir, COMPONENT.name, COMPONENT.marker)
    return pid is not None and COMPONENT.healthy(settings)


def accepted(api: client.ApiClient) -> bool:
    """Whether Traefik has taken the Gateway: its Programmed condition is True."""
    gateway = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", NAMESPACE, "gateways", NAME
    )
    conditions = (gateway.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Programmed" and c["status"] == "True" for c in conditions)


def start(settings: Settings, api: client.ApiClient, start_and_wait) -> None:
    """Apply the gateway's objects, then start Traefik (``start_and_wait``: the cluster's own)
    unless it runs; the Gateway API's CRDs must be installed."""
    if settings.instance != 1:
        raise GatewayUnavailable("the gateway runs on instance 1 only, beside the real node")
    for obj in objects():
        apply(api, obj)
    if running(settings):
        return
    stop(settings)
    directory(settings).mkdir(parents=True, exist_ok=True)
    (directory(settings) / "traefik.yaml").write_text(yaml.safe_dump(static_config()))
    credentials.mint(IDENTITY, settings=settings, output=directory(settings) / "gateway.kubeconfig")
    start_and_wait(settings, [COMPONENT])


def stop(settings: Settings) -> bool:
    return processes.stop(settings.run_dir, COMPONENT.name, COMPONENT.marker)
