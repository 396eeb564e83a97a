"""The Gateway API's CRDs as a devcluster component: the standard channel of
``sigs.k8s.io/gateway-api`` (HTTPRoute, Gateway, GatewayClass, ...), copied from the Go module
into the cache by the build (``builder.FILE_MODULES``) and applied by ``up`` unless the cluster
is started without them (``--no-gateway-api``, ``DEVCLUSTER_GATEWAY_API=0``).

Only the CRDs: no gateway controller runs, so routes are objects the API server stores and
validates, and no traffic is served (kwok runs no containers either). The inference services
use them for their traffic splits; a test may remove them for a moment (``removed``) to see
the portal fall back to replica counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from devcluster import builder, processes
from devcluster.kueue import apply
from devcluster.log import progress

GROUP = "gateway.networking.k8s.io"
HTTP_ROUTES = f"httproutes.{GROUP}"


def crds() -> list[dict]:
    """The standard channel's CustomResourceDefinitions, from the cache (fetched first if the
    cache lacks them)."""
    builder.fetch_files()
    directory = builder.module_files_dir("gateway-api") / "config" / "crd" / "standard"
    found = []
    for path in sorted(directory.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") == "CustomResourceDefinition":
                found.append(document)
    return found


def _established(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    conditions = extensions.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def serves_http_routes(api: client.ApiClient) -> bool:
    """Whether the API's discovery lists HTTPRoutes (what the portal asks)."""
    try:
        resources = client.CustomObjectsApi(api).get_api_resources(GROUP, "v1")
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return any(r.name == "httproutes" for r in resources.resources or [])


def install(api: client.ApiClient, timeout: float = 60.0) -> None:
    """Apply the CRDs and wait until they are established and HTTPRoutes are served."""
    started = time.monotonic()
    definitions = crds()
    for crd in definitions:
        apply(api, crd)
    extensions = client.ApiextensionsV1Api(api)
    for crd in definitions:
        name = crd["metadata"]["name"]
        processes.wait_until(
            lambda name=name: _established(extensions, name), timeout, f"CRD {name}"
        )
    processes.wait_until(lambda: serves_http_routes(api), timeout, "HTTPRoutes to be served")
    progress(f"applied the Gateway API's CRDs in {time.monotonic() - started:.1f}s")


def uninstall(api: client.ApiClient, timeout: float = 60.0) -> None:
    """Delete the CRDs (and with them every route) and wait until HTTPRoutes are not served."""
    extensions = client.ApiextensionsV1Api(api)
    for crd in crds():
        try:
            extensions.delete_custom_resource_definition(crd["metadata"]["name"])
        except ApiException as error:
            if error.status != 404:
                raise

    def gone() -> bool:
        try:
            extensions.read_custom_resource_definition(HTTP_ROUTES)
        except ApiException as error:
            if error.status == 404:
                return not serves_http_routes(api)
            raise
        return False

    processes.wait_until(gone, timeout, "the Gateway API's CRDs to be deleted")


@contextmanager
def removed(api: client.ApiClient) -> Iterator[None]:
    """A cluster without the Gateway API for the block; the CRDs are back after it, whatever
    the block does (routes made before are gone for good)."""
    uninstall(api)
    try:
        yield
    finally:
        install(api)
