"""A portal of its own on the shared devcluster's Kueue, for tests of Kueue mode.

Kueue's flavors, priority classes and the cohort are cluster-wide and named after the portal
(``PORTAL_NAME``): two test sessions (or two tests) under one portal name would share a cohort,
lend each other GPUs and prune each other's flavors. So these tests run under a portal name of
their own, in the test process (``override_settings``) and in their worker (its environment), and
read what the cluster holds with the devcluster's admin client through ``KueueObjects``.
"""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.rest import ApiException

from clusters.vocabulary import MANAGED_BY_LABEL
from tests.integration.conftest import wait_for

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
CLUSTER_PLURALS = ("clusterqueues", "resourceflavors", "workloadpriorityclasses", "cohorts")


class KueueObjects:
    """Kueue objects as the cluster holds them (the admin's view), for one portal name."""

    def __init__(self, api: client.ApiClient, portal_name: str):
        self.api = client.CustomObjectsApi(api)
        self.portal_name = portal_name

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            if namespace:
                return self.api.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name
                )
            return self.api.get_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def names(self, plural: str, namespace: str | None = None) -> list[str]:
        """The portal's objects of a kind (not being deleted), by name."""
        selector = f"{MANAGED_BY_LABEL}={self.portal_name}"
        if namespace:
            found = self.api.list_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, label_selector=selector
            )
        else:
            found = self.api.list_cluster_custom_object(
                GROUP, VERSION, plural, label_selector=selector
            )
        return sorted(
            item["metadata"]["name"]
            for item in found["items"]
            if not item["metadata"].get("deletionTimestamp")
        )

    def patch(self, plural: str, name: str, body: dict, namespace: str | None = None) -> dict:
        if namespace:
            return self.api.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, body
            )
        return self.api.patch_cluster_custom_object(GROUP, VERSION, plural, name, body)

    def delete(self, plural: str, name: str, namespace: str | None = None) -> None:
        try:
            if namespace:
                self.api.delete_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
            else:
                self.api.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as error:
            if error.status != 404:
                raise

    def nominal_quota(self, cluster_queue: str) -> dict[str, str]:
        """Per flavor, the nominalQuota of nvidia.com/gpu in the ClusterQueue (as applied)."""
        queue = self.get("clusterqueues", cluster_queue)
        if queue is None:
            return {}
        group = queue["spec"]["resourceGroups"][0]
        return {
            flavor["name"]: next(
                r["nominalQuota"] for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"
            )
            for flavor in group["flavors"]
        }

    def remove_everything(self, *, timeout: float = 90) -> None:
        """Delete the portal's cluster-wide objects and wait until they are gone: a
        ClusterQueue waits for its workloads, a flavor for the queues that use it."""
        for plural in CLUSTER_PLURALS:
            for name in self.names(plural):
                self.delete(plural, name)
        wait_for(
            lambda: not any(self._all(plural) for plural in CLUSTER_PLURALS),
            timeout=timeout,
            what=f"the Kueue objects of {self.portal_name} to be gone",
        )

    def _all(self, plural: str) -> list[str]:
        found = self.api.list_cluster_custom_object(
            GROUP, VERSION, plural, label_selector=f"{MANAGED_BY_LABEL}={self.portal_name}"
        )
        return [item["metadata"]["name"] for item in found["items"]]
