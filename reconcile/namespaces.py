"""Whether a team's namespace on a cluster is the portal's, asked before anything touches it.

A namespace of the team's name that someone else made (before the team existed, or after the
portal's was deleted) is never the team's: the reconcile applies nothing there (it raises
``NamespaceNotOwned`` and records it on ``TeamCluster``), the worker creates no Job in it, and
monitoring shows no metrics from it and stops nothing in it.

Two ways to know, at two costs:

* ``check_namespace_owned`` reads the namespace from the API server now (one GET): for what writes
  to the cluster (the reconcile, the worker creating a Job, the idle policy stopping one).
* ``TeamCluster.namespace_owned``, which every reconcile pass records (read with
  ``tenants.selectors.namespace_ownership``): for what only reads metrics, which must not wait
  for an API server on every page. It is as fresh as the last pass: every grant or membership
  change and every sweep makes one.
"""

from __future__ import annotations

from django.conf import settings

from clusters.kube import KubeClient, NotOwned
from reconcile import manifests


class NamespaceNotOwned(NotOwned):
    """The team's namespace exists on the cluster, but not with the portal's labels for it."""


def not_owned(*, slug: str, cluster_name: str) -> NamespaceNotOwned:
    return NamespaceNotOwned(
        f"Namespace {slug} already exists on cluster {cluster_name} and was not created by the "
        f"portal for team {slug}, so the portal leaves it alone. A cluster admin must delete or "
        "rename it (or the team needs another slug)."
    )


def reserved(*, slug: str, cluster_name: str) -> NamespaceNotOwned:
    """The cluster reserves the team's namespace for one of its own components (an admin added
    it after the team was made): the portal creates and changes nothing there."""
    return NamespaceNotOwned(
        f"Namespace {slug} is reserved on cluster {cluster_name} for the cluster's own "
        f"components, so the portal makes nothing there for team {slug}. An admin removes it "
        "from the cluster's reserved namespaces (or the team needs another slug)."
    )


def check_namespace_owned(
    kube: KubeClient, *, slug: str, rules: manifests.Policy | None = None
) -> dict | None:
    """The team's namespace as the cluster holds it now, or None when there is none. Raises
    ``NamespaceNotOwned`` when it lacks the portal's labels for the team (``KubeError`` when the
    cluster cannot say)."""
    rules = rules or manifests.Policy(portal_name=settings.PORTAL_NAME)
    live = kube.get("Namespace", slug)
    if live is not None and not manifests.is_owned(live, slug=slug, policy=rules):
        raise not_owned(slug=slug, cluster_name=kube.cluster_name)
    return live
