"""What the devcluster's components need before they start, and the objects the cluster needs
once its API server answers: credentials and kubeconfigs, the Prometheus configuration and the
portal's recording rules, kwok's pod-logs configuration, kwok's Logs resource and the DCGM
simulator's and sharing manager's RBAC. Each step may run again on an existing state directory."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client

from core.validators import LabelMatcher
from devcluster import kubeconfig, pki, podlogs, processes, tenant_metrics
from devcluster.components import kwok_logs_config
from devcluster.real_node import REAL_NODE_NAME
from devcluster.settings import Settings
from monitoring import promql

KUBERNETES_SERVICE_IP = "10.96.0.1"
# The portal's recording rules, loaded from <state>/prometheus/rules/ (see prometheus_rules).
PROMETHEUS_RULES_FILE = "gpu-portal.yml"
DCGM_SIMULATOR_ROLE = "devcluster:dcgm-simulator"
SHARING_MANAGER_ROLE = "devcluster:sharing-manager"
# identity (ClusterRole, ClusterRoleBinding and user name alike) -> its rules
COMPONENT_ROLES = {
    DCGM_SIMULATOR_ROLE: [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]}
    ],
    # The GPU Operator's MIG manager and device plugin, simulated (devcluster/sharing_manager.py).
    SHARING_MANAGER_ROLE: [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    ],
}


def write_pod_logs_config(settings: Settings) -> None:
    """The default log every simulated container serves, and kwok's rule pointing at it."""
    default_log = settings.pod_logs_dir / "default.log"
    default_log.unlink(missing_ok=True)
    podlogs.append_lines(default_log, podlogs.DEFAULT_LINES)
    kwok_logs_config(settings).write_text(
        yaml.safe_dump(podlogs.cluster_logs_rule(default_log), sort_keys=False)
    )


def prepare_credentials(settings: Settings) -> None:
    """The CA, the apiserver's serving cert, service-account keys and component kubeconfigs."""
    ca = pki.ensure_ca(settings.pki_dir)
    pki.ensure_service_account_keys(settings.pki_dir)
    pki.ensure_issued(
        ca,
        settings.pki_dir,
        "apiserver",
        "kube-apiserver",
        server_names=[
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        server_ips=["127.0.0.1", KUBERNETES_SERVICE_IP],
    )
    pki.ensure_issued(
        ca, settings.pki_dir, "kwok", "kwok", server_names=["localhost"], server_ips=["127.0.0.1"]
    )
    # How the apiserver proves itself to a real kubelet (logs, exec): a kubelet authorizes it
    # with the apiserver, which lets system:masters do anything.
    pki.ensure_issued(
        ca,
        settings.pki_dir / "clients",
        "apiserver-kubelet-client",
        "kube-apiserver-kubelet-client",
        ["system:masters"],
    )
    front_proxy_ca = pki.ensure_ca(settings.pki_dir, "front-proxy-ca", "front-proxy-ca")
    pki.ensure_issued(front_proxy_ca, settings.pki_dir, "front-proxy-client", "front-proxy-client")
    identities = {
        # component: (user name, groups)
        "admin": ("devcluster-admin", ["system:masters"]),
        "controller-manager": ("system:kube-controller-manager", []),
        "scheduler": ("system:kube-scheduler", []),
        # kwok plays every kubelet (node status, leases, pod status, deletes), so it is admin.
        "kwok": ("devcluster:kwok", ["system:masters"]),
        "dcgm-simulator": (DCGM_SIMULATOR_ROLE, []),
        "sharing-manager": (SHARING_MANAGER_ROLE, []),
        # The real node (devcluster/real_node.py): its kubelet as the Node authorizer wants it,
        # and kube-proxy as the bootstrap policy's system:node-proxier binding names it.
        "kubelet": (f"system:node:{REAL_NODE_NAME}", ["system:nodes"]),
        "kube-proxy": ("system:kube-proxy", []),
    }
    for component, (user, groups) in identities.items():
        path = (
            settings.admin_kubeconfig
            if component == "admin"
            else settings.kubeconfig_dir / f"{component}.kubeconfig"
        )
        pair = pki.ensure_issued(ca, settings.pki_dir / "clients", component, user, groups)
        if not path.exists():
            kubeconfig.write(path, settings.apiserver_url, ca.cert, pair, user)
        else:
            _point_kubeconfig_at(path, settings.apiserver_url)


def _point_kubeconfig_at(path: Path, server: str) -> None:
    """Keep an existing kubeconfig's credentials but follow a changed apiserver port."""
    document = yaml.safe_load(path.read_text())
    for cluster in document.get("clusters", []):
        cluster["cluster"]["server"] = server
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def write_prometheus_config(settings: Settings) -> None:
    interval = f"{settings.scrape_interval_seconds}s"
    directory = settings.state_dir / "prometheus"
    directory.mkdir(parents=True, exist_ok=True)
    settings.prometheus_data_dir.mkdir(parents=True, exist_ok=True)
    (directory / "prometheus.yml").write_text(
        "# Written by `python -m devcluster up`; edits are overwritten.\n"
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  evaluation_interval: {interval}\n"
        "scrape_configs:\n"
        "  - job_name: dcgm-exporter\n"
        "    honor_labels: true\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{settings.dcgm_port}']\n"
        "  - job_name: prometheus\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{settings.prometheus_port}']\n"
        + tenant_metrics.scrape_config(settings)
        + "rule_files:\n"
        + f"  - {directory / 'rules' / '*.yml'}\n"
    )
    rules = directory / "rules" / PROMETHEUS_RULES_FILE
    rules.parent.mkdir(exist_ok=True)
    rules.write_text(yaml.safe_dump(prometheus_rules(), sort_keys=False))


# What only the simulator's series carry: the job it is scraped as (tenant pods' series are
# job="tenant-pods"), as a portal Cluster pins its DCGM queries by default.
DCGM_EXPORTER_PIN = (LabelMatcher("job", "=", "dcgm-exporter"),)


def prometheus_rules() -> dict:
    """The portal's recording rules (``monitoring.promql``, as its cluster-wide export carries
    them) for the simulator's label layout, its exporter pin and both utilisation metrics it
    publishes."""
    configs = [
        promql.MetricsConfig(utilisation_metric=metric, exporter=DCGM_EXPORTER_PIN)
        for metric in (promql.GPU_UTIL, promql.GR_ENGINE_ACTIVE)
    ]
    return {
        "groups": [
            {
                "name": f"gpu-portal-recording-{config.utilisation_metric.lower()}",
                "rules": promql.recording_rules(config),
            }
            for config in configs
        ]
    }


def install_logs_crd(api: client.ApiClient, timeout: float = 60.0) -> None:
    """kwok's ``Logs`` resource, established before kwok starts watching it."""
    extensions = client.ApiextensionsV1Api(api)
    crd = podlogs.logs_crd()
    try:
        extensions.create_custom_resource_definition(crd)
    except client.ApiException as error:
        if error.status != 409:
            raise

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(
            crd["metadata"]["name"]
        ).status.conditions
        return any(c.type == "Established" and c.status == "True" for c in conditions or [])

    processes.wait_until(established, timeout, "kwok's Logs resource to be established")


def install_rbac(api: client.ApiClient) -> None:
    """Let the DCGM simulator read nodes and pods, and the sharing manager also patch nodes and
    their status, and nothing else (``COMPONENT_ROLES``)."""
    rbac = client.RbacAuthorizationV1Api(api)
    for name, rules in COMPONENT_ROLES.items():
        _install_role(rbac, name, rules)


def _install_role(rbac: client.RbacAuthorizationV1Api, name: str, rules: list[dict]) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
    }
    for create, replace, body in (
        (rbac.create_cluster_role, rbac.replace_cluster_role, role),
        (rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding, binding),
    ):
        try:
            create(body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            replace(body["metadata"]["name"], body)
