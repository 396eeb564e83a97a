"""Kueue's objects for a Kueue-mode cluster of the portal, as the issue-10 design has the
reconcile make them ("Objects per Kueue-mode cluster"), applied to a devcluster with server-side
apply: a ResourceFlavor per GPU model (the cluster's GPU node labels, the model label and the GPU
taint's toleration), one for grants of any model and one for CPU and memory; the two
WorkloadPriorityClasses; per team a guaranteed ClusterQueue (its own quota per flavor, borrowing
nothing, lending up to its lending limit) and an opportunistic one (no quota, borrowing up to its
borrowing limit), both in one cohort and picking the team's namespace only, and the two
LocalQueues in the namespace.

Shared by the Kueue-mode tests and ``tests/bench/bench_kueue.py`` until the portal's reconcile
makes these objects itself; no database, no pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kubernetes import client
from kubernetes.client.rest import ApiException

from clusters.vocabulary import (
    GUARANTEED,
    KUEUE_API_VERSION,
    LOCAL_QUEUES,
    MANAGED_BY_LABEL,
    OPPORTUNISTIC,
    TEAM_LABEL,
    cluster_queue_name,
    priority_class_name,
)

GROUP, VERSION = KUEUE_API_VERSION.split("/")
GPU = "nvidia.com/gpu"
PRIORITY_VALUES = {GUARANTEED: 1000, OPPORTUNISTIC: 100}
FIELD_MANAGER = "kueue-tests"


def flavor_name(portal_name: str, model: str) -> str:
    """``<portal>-<model in DNS-1123>``; ``<portal>-any-gpu`` for grants of any model."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") if model else "any-gpu"
    return f"{portal_name}-{slug}"


class KueueObjects:
    """Applies and removes the Kueue objects of one cluster's teams."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        portal_name: str,
        models: Iterable[str],
        cohort: str,
        node_selector: dict[str, str],
        model_label: str,
        taint_key: str,
    ):
        self.api = api
        self.objects = client.CustomObjectsApi(api)
        self.portal_name = portal_name
        self.models = list(models)
        self.cohort = cohort
        self.node_selector = dict(node_selector)
        self.model_label = model_label
        self.taint_key = taint_key
        self.cluster_queues: list[str] = []

    @property
    def cpu_flavor(self) -> str:
        return f"{self.portal_name}-cpu-memory"

    def _labels(self, **extra) -> dict:
        return {MANAGED_BY_LABEL: self.portal_name, **extra}

    def apply(self, plural: str, body: dict, namespace: str | None = None) -> None:
        """Server-side apply, as the reconcile would."""
        body = {"apiVersion": KUEUE_API_VERSION, **body}
        scope = f"/namespaces/{namespace}" if namespace else ""
        self.api.call_api(
            f"/apis/{KUEUE_API_VERSION}{scope}/{plural}/{body['metadata']['name']}",
            "PATCH",
            query_params=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            header_params={
                "Content-Type": "application/apply-patch+yaml",
                "Accept": "application/json",
            },
            body=body,
            response_type="object",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )

    def cluster_wide(self) -> None:
        toleration = {"key": self.taint_key, "operator": "Exists", "effect": "NoSchedule"}
        for model in [*self.models, ""]:
            labels = dict(self.node_selector)
            if model:
                labels[self.model_label] = model
            self.apply(
                "resourceflavors",
                {
                    "kind": "ResourceFlavor",
                    "metadata": {
                        "name": flavor_name(self.portal_name, model),
                        "labels": self._labels(),
                    },
                    "spec": {"nodeLabels": labels, "tolerations": [toleration]},
                },
            )
        self.apply(
            "resourceflavors",
            {
                "kind": "ResourceFlavor",
                "metadata": {"name": self.cpu_flavor, "labels": self._labels()},
                "spec": {},
            },
        )
        for kind, value in PRIORITY_VALUES.items():
            self.apply(
                "workloadpriorityclasses",
                {
                    "kind": "WorkloadPriorityClass",
                    "metadata": {
                        "name": priority_class_name(self.portal_name, kind),
                        "labels": self._labels(),
                    },
                    "value": value,
                    "description": f"{kind} work",
                },
            )

    def team(
        self,
        slug: str,
        *,
        own: dict[str, int],
        borrowing_limit: int | None = None,
        lending_limit: int | None = None,
        weight: str = "1",
    ) -> None:
        """The team's ClusterQueues and LocalQueues; ``own``: its GPUs per model ("" for any
        model)."""
        for kind in LOCAL_QUEUES:
            flavors = []
            for model in [*self.models, ""]:
                resource: dict = {"name": GPU}
                if kind == GUARANTEED:
                    nominal = own.get(model, 0)
                    resource.update(nominalQuota=nominal, borrowingLimit=0)
                    if lending_limit is not None:
                        resource["lendingLimit"] = min(lending_limit, nominal)
                else:
                    resource["nominalQuota"] = 0
                    if borrowing_limit is not None:
                        resource["borrowingLimit"] = borrowing_limit
                flavors.append(
                    {"name": flavor_name(self.portal_name, model), "resources": [resource]}
                )
            cpu_memory = [
                {"name": "cpu", "nominalQuota": "1000"},
                {"name": "memory", "nominalQuota": "10000Gi"},
            ]
            name = cluster_queue_name(self.portal_name, slug, kind)
            spec = {
                "cohortName": self.cohort,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": slug}},
                "resourceGroups": [
                    {"coveredResources": [GPU], "flavors": flavors},
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": self.cpu_flavor, "resources": cpu_memory}],
                    },
                ],
                "fairSharing": {"weight": weight},
                "preemption": {
                    "reclaimWithinCohort": "Any",
                    "withinClusterQueue": "LowerPriority",
                },
            }
            labels = self._labels(**{TEAM_LABEL: slug})
            self.apply(
                "clusterqueues",
                {"kind": "ClusterQueue", "metadata": {"name": name, "labels": labels},
                 "spec": spec},
            )  # fmt: skip
            self.apply(
                "localqueues",
                {
                    "kind": "LocalQueue",
                    "metadata": {"name": kind, "namespace": slug, "labels": labels},
                    "spec": {"clusterQueue": name},
                },
                namespace=slug,
            )
            if name not in self.cluster_queues:
                self.cluster_queues.append(name)

    def remove_team(self, slug: str) -> None:
        for kind in LOCAL_QUEUES:
            self.delete("localqueues", kind, namespace=slug)
            self.delete("clusterqueues", cluster_queue_name(self.portal_name, slug, kind))

    def delete(self, plural: str, name: str, namespace: str | None = None) -> None:
        try:
            if namespace:
                self.objects.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name
                )
            else:
                self.objects.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as error:
            if error.status != 404:
                raise

    def cleanup(self) -> None:
        """The ClusterQueues this made (each waits, by its finalizer, until its workloads are
        gone with their namespaces)."""
        for name in self.cluster_queues:
            self.delete("clusterqueues", name)
