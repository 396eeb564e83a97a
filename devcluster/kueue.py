"""Kueue as a devcluster component: its files in the state directory, its objects in the
cluster, and how to start it and tell that it is healthy. The objects themselves are built by
devcluster.kueue_manifests."""

from __future__ import annotations

import time

import yaml
from kubernetes import client

from devcluster import builder, kubeconfig, pki, processes
from devcluster import kueue_manifests as manifests
from devcluster.log import progress
from devcluster.settings import Settings

FIELD_MANAGER = "devcluster"
VISIBILITY_API_SERVICE = f"v1beta2.{manifests.VISIBILITY_GROUP}"


def config_file(settings: Settings) -> str:
    return str(settings.kueue_dir / "config.yaml")


def kubeconfig_file(settings: Settings) -> str:
    return str(settings.kubeconfig_dir / "kueue.kubeconfig")


def prepare(settings: Settings) -> None:
    """Kueue's serving certificate from the cluster CA (webhooks, metrics and visibility API
    share it), its client credentials and its configuration file."""
    ca = pki.ensure_ca(settings.pki_dir)
    cert_dir = settings.kueue_dir / builder.KUEUE_CERT_DIR
    pki.ensure_issued(
        ca,
        cert_dir,
        "tls",
        "kueue",
        server_names=manifests.serving_names(),
        server_ips=["127.0.0.1"],
    )
    # Named after the identity: a devcluster started before Kueue's user changed gets a new one.
    identity = pki.ensure_issued(
        ca, settings.pki_dir / "clients", "kueue-controller-manager", manifests.USER
    )
    kubeconfig.write(
        settings.kubeconfig_dir / "kueue.kubeconfig",
        settings.apiserver_url,
        ca.cert,
        identity,
        manifests.USER,
    )
    configuration = manifests.configuration(
        health_port=settings.kueue_health_port,
        metrics_port=settings.kueue_metrics_port,
        webhook_port=settings.kueue_webhook_port,
        visibility_port=settings.kueue_visibility_port,
        cert_dir=cert_dir,
    )
    settings.kueue_dir.mkdir(parents=True, exist_ok=True)
    (settings.kueue_dir / "config.yaml").write_text(
        "# Written by `python -m devcluster up`; edits are overwritten.\n"
        + yaml.safe_dump(configuration, sort_keys=False)
    )


def command(settings: Settings) -> list[str]:
    return [
        str(builder.binary("kueue")),
        f"--config={config_file(settings)}",
        f"--kubeconfig={kubeconfig_file(settings)}",
    ]


def apply(api: client.ApiClient, obj: dict) -> dict:
    """Server-side apply as the devcluster, taking over fields others changed."""
    return api.call_api(
        manifests.api_path(obj),
        "PATCH",
        query_params=[("fieldManager", FIELD_MANAGER), ("force", "true")],
        header_params={
            "Content-Type": "application/apply-patch+yaml",
            "Accept": "application/json",
        },
        body=obj,
        response_type="object",
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )


def install(api: client.ApiClient, settings: Settings, timeout: float = 60.0) -> None:
    """Kueue's namespace, CRDs (established), RBAC, webhook configurations and visibility API."""
    started = time.monotonic()
    components = builder.module_files_dir("kueue") / "config" / "components"
    ca = manifests.ca_bundle(settings.pki_dir / "ca.crt")
    url = settings.kueue_webhook_url
    apply(api, manifests.namespace())
    crds = manifests.crds(components / "crd", url, ca)
    for crd in crds:
        apply(api, crd)
    extensions = client.ApiextensionsV1Api(api)

    def established(name: str) -> bool:
        conditions = extensions.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    for crd in crds:
        name = crd["metadata"]["name"]
        processes.wait_until(lambda name=name: established(name), timeout, f"CRD {name}")
    objects = [
        *manifests.rbac([components / "rbac", components / "visibility"]),
        *manifests.webhook_configurations(components / "webhook", url, ca),
        *manifests.visibility(components / "visibility", settings.kueue_visibility_port, ca),
    ]
    for obj in objects:
        apply(api, obj)
    progress(f"applied Kueue's CRDs and objects in {time.monotonic() - started:.1f}s")


def uninstall_hooks(api: client.ApiClient) -> None:
    """Remove Kueue's webhook configurations and APIServices (a cluster started without Kueue
    from an etcd that had it would otherwise refuse every Job: the webhooks fail closed)."""
    admission = client.AdmissionregistrationV1Api(api)
    registration = client.ApiregistrationV1Api(api)
    selector = "app.kubernetes.io/name=kueue"
    for lister, deleter in (
        (
            admission.list_mutating_webhook_configuration,
            admission.delete_mutating_webhook_configuration,
        ),
        (
            admission.list_validating_webhook_configuration,
            admission.delete_validating_webhook_configuration,
        ),
        (registration.list_api_service, registration.delete_api_service),
    ):
        for item in lister(label_selector=selector).items:
            deleter(item.metadata.name)
            progress(f"removed {item.metadata.name} (Kueue is not started)")


def visibility_available(api: client.ApiClient) -> bool:
    """Whether the API server reaches Kueue's visibility API (the APIService is Available)."""
    service = client.ApiregistrationV1Api(api).read_api_service(VISIBILITY_API_SERVICE)
    conditions = service.status.conditions or []
    return any(c.type == "Available" and c.status == "True" for c in conditions)
