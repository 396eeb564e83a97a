"""Kueue's objects as the devcluster applies them: Kueue's own manifests (here small stand-ins in
the same layout) rewritten to call Kueue on loopback and to run as the minted user."""

from pathlib import Path

import pytest
import yaml

from devcluster import kueue_manifests as manifests

URL = "https://127.0.0.1:29443"
CA = "Q0EgYnVuZGxl"
KUEUE_SERVICE_ACCOUNT = {"name": "controller-manager", "namespace": "system"}
RBAC = "rbac.authorization.k8s.io"


def write(path: Path, *documents: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents))


def crd(plural: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kueue.x-k8s.io"},
        "spec": {"group": "kueue.x-k8s.io", "versions": []},
    }


def webhook(name: str, group: str, resource: str, path: str) -> dict:
    return {
        "name": name,
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "failurePolicy": "Fail",
        "rules": [{"apiGroups": [group], "resources": [resource], "operations": ["CREATE"]}],
    }


@pytest.fixture
def components(tmp_path) -> Path:
    """Kueue's config/components, cut down to what the rewriting looks at."""
    root = tmp_path / "components"
    (root / "crd").mkdir(parents=True)
    (root / "crd" / "kustomization.yaml").write_text(
        "resources:\n- bases/kueue.x-k8s.io_workloads.yaml\n"
        "patches:\n"
        "- path: patches/webhook_in_workloads.yaml\n"
        "#- path: patches/webhook_in_resourceflavors.yaml\n"
    )
    write(root / "crd" / "bases" / "kueue.x-k8s.io_workloads.yaml", crd("workloads"))
    write(root / "crd" / "bases" / "kueue.x-k8s.io_resourceflavors.yaml", crd("resourceflavors"))
    write(
        root / "webhook" / "manifests.yaml",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                webhook("mjob.kb.io", "batch", "jobs", "/mutate-batch-v1-job"),
                webhook("mpod.kb.io", "", "pods", "/mutate--v1-pod"),
                webhook("mmpijob.kb.io", "kubeflow.org", "mpijobs", "/mutate-mpijob"),
                webhook("mworkload.kb.io", "kueue.x-k8s.io", "workloads", "/mutate-workload"),
            ],
        },
    )
    write(
        root / "rbac" / "role.yaml",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "manager-role"},
            "rules": [],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "manager-secrets-role", "namespace": "system"},
            "rules": [],
        },
    )
    write(
        root / "rbac" / "role_binding.yaml",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "manager-rolebinding"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "manager-role",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}
            ],
        },
    )
    (root / "rbac" / "kustomization.yaml").write_text("resources:\n- role.yaml\n")
    write(
        root / "visibility" / "role_binding.yaml",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "visibility-server-auth-reader", "namespace": "kube-system"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}
            ],
        },
    )
    write(
        root / "visibility" / "apiservice_v1beta2.yaml",
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1beta2.visibility.kueue.x-k8s.io"},
            "spec": {
                "group": "visibility.kueue.x-k8s.io",
                "version": "v1beta2",
                "insecureSkipTLSVerify": True,
                "service": {"name": "visibility-server", "namespace": "kueue-system"},
            },
        },
    )
    return root


def test_only_the_crds_kueues_kustomization_patches_get_our_conversion_webhook(components):
    by_name = {c["metadata"]["name"]: c for c in manifests.crds(components / "crd", URL, CA)}

    conversion = by_name["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"] == {"url": f"{URL}/convert", "caBundle": CA}
    assert "conversion" not in by_name["resourceflavors.kueue.x-k8s.io"]["spec"]


@pytest.mark.parametrize(
    ("group", "resource", "framework"),
    [
        ("batch", "jobs", "batch/job"),
        ("", "pods", "pod"),
        ("apps", "deployments", "deployment"),
        ("kubeflow.org", "mpijobs", "kubeflow.org/mpijob"),
        ("workload.codeflare.dev", "appwrappers", "workload.codeflare.dev/appwrapper"),
        ("kueue.x-k8s.io", "workloads/status", None),
    ],
)
def test_a_webhook_rule_names_the_integration_it_belongs_to(group, resource, framework):
    rule = {"apiGroups": [group], "resources": [resource]}

    assert manifests.framework_of(rule) == framework


def test_webhooks_call_kueue_on_loopback_for_enabled_integrations_and_kueues_own_kinds(components):
    (config,) = manifests.webhook_configurations(components / "webhook", URL, CA, ("batch/job",))

    assert config["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    hooks = {hook["name"]: hook for hook in config["webhooks"]}
    assert sorted(hooks) == ["mjob.kb.io", "mworkload.kb.io"]
    assert hooks["mjob.kb.io"]["clientConfig"] == {
        "url": f"{URL}/mutate-batch-v1-job",
        "caBundle": CA,
    }
    assert hooks["mjob.kb.io"]["failurePolicy"] == "Fail"  # as Kueue ships it


def test_a_pod_based_integration_leaves_the_system_namespaces_alone(components):
    (config,) = manifests.webhook_configurations(components / "webhook", URL, CA, ("pod",))

    (pod_hook,) = [h for h in config["webhooks"] if h["name"] == "mpod.kb.io"]
    (expression,) = pod_hook["namespaceSelector"]["matchExpressions"]
    assert expression["operator"] == "NotIn"
    assert set(expression["values"]) == {"kube-system", "kueue-system"}


def test_a_pod_based_integration_is_called_only_for_objects_labelled_with_a_queue(components):
    """Every other pod is created without Kueue, also while Kueue is down."""
    (config,) = manifests.webhook_configurations(components / "webhook", URL, CA, ("pod",))

    (pod_hook,) = [h for h in config["webhooks"] if h["name"] == "mpod.kb.io"]
    assert pod_hook["objectSelector"] == {
        "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
    }
    (job_config,) = manifests.webhook_configurations(
        components / "webhook", URL, CA, ("batch/job",)
    )
    assert all("objectSelector" not in hook for hook in job_config["webhooks"])


def test_kueue_runs_as_the_identity_the_portals_policies_trust_to_admit():
    from clusters.vocabulary import KUEUE_MANAGER_USER

    assert manifests.USER == KUEUE_MANAGER_USER


def test_kueues_roles_are_prefixed_and_bound_to_the_minted_user(components):
    objects = manifests.rbac([components / "rbac", components / "visibility"])

    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert ("ClusterRole", "kueue-manager-role") in by_name
    assert by_name[("Role", "kueue-manager-secrets-role")]["metadata"]["namespace"] == (
        "kueue-system"
    )
    binding = by_name[("ClusterRoleBinding", "kueue-manager-rolebinding")]
    assert binding["roleRef"]["name"] == "kueue-manager-role"
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": manifests.USER}
    ]
    reader = by_name[("RoleBinding", "kueue-visibility-server-auth-reader")]
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"


def test_the_visibility_api_is_served_through_an_external_name_service_on_loopback(components):
    service, api_service = manifests.visibility(components / "visibility", 28082, CA)

    assert service["spec"] == {"type": "ExternalName", "externalName": "127.0.0.1"}
    spec = api_service["spec"]
    assert spec["service"] == {
        "name": service["metadata"]["name"],
        "namespace": "kueue-system",
        "port": 28082,
    }
    assert spec["caBundle"] == CA
    assert "insecureSkipTLSVerify" not in spec
    assert f"{service['metadata']['name']}.kueue-system.svc" in manifests.serving_names()


def test_the_configuration_listens_on_loopback_and_leaves_unlabelled_jobs_alone(tmp_path):
    config = manifests.configuration(
        health_port=1, metrics_port=2, webhook_port=3, visibility_port=4, cert_dir=tmp_path
    )

    assert config["manageJobsWithoutQueueName"] is False
    assert config["integrations"]["frameworks"] == ["batch/job", "pod", "deployment"]
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert "waitForPodsReady" not in config
    assert config["fairSharing"]["preemptionStrategies"]
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:1"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:2"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 3, "certDir": str(tmp_path)}
    assert config["visibilityServer"] == {"bindAddress": "127.0.0.1", "bindPort": 4}


def test_api_paths_follow_the_group_scope_and_plural():
    namespaced = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "n"},
    }
    cluster_wide = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1.x"},
    }

    assert manifests.api_path(namespaced) == "/api/v1/namespaces/n/services/s"
    assert manifests.api_path(cluster_wide) == "/apis/apiregistration.k8s.io/v1/apiservices/v1.x"


def test_plurals_of_the_kinds_the_devcluster_applies():
    assert manifests.plural("ValidatingAdmissionPolicy") == "validatingadmissionpolicies"
    assert manifests.plural("ClusterRoleBinding") == "clusterrolebindings"
    assert manifests.plural("Namespace") == "namespaces"
