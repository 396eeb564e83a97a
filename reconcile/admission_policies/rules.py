"""A cluster's rules as the policies read them, built from its settings by
``reconcile.cluster_pass``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clusters.vocabulary import DEFAULT_APPS_DOMAIN


@dataclass(frozen=True)
class ClusterRules:
    """What the policies depend on: the cluster's GPU placement and its allowed registries
    (normalised entries, ``clusters.image_references.registry_entries``)."""

    portal_name: str
    gpu_node_selector: tuple[tuple[str, str], ...] = ()
    gpu_taint_key: str = ""
    allowed_registries: tuple[str, ...] = ()
    allow_all_registries: bool = False
    allowed_priority_classes: tuple[str, ...] = ()
    apps_domain: str = DEFAULT_APPS_DOMAIN
    kueue: bool = False  # the cluster's quota is Kueue's: GPU work goes through its queues
    portal_url: str = ""  # where the refusals send members to submit instead


def cluster_rules(
    *,
    portal_name: str,
    gpu_node_selector: dict[str, str] | None = None,
    gpu_taint_key: str = "",
    allowed_registries: Iterable[str] = (),
    allow_all_registries: bool = False,
    allowed_priority_classes: Iterable[str] = (),
    apps_domain: str = DEFAULT_APPS_DOMAIN,
    kueue: bool = False,
    portal_url: str = "",
) -> ClusterRules:
    return ClusterRules(
        portal_name=portal_name,
        gpu_node_selector=tuple(sorted((gpu_node_selector or {}).items())),
        gpu_taint_key=gpu_taint_key,
        allowed_registries=tuple(allowed_registries),
        allow_all_registries=allow_all_registries,
        allowed_priority_classes=tuple(sorted(set(allowed_priority_classes))),
        apps_domain=apps_domain,
        kueue=kueue,
        portal_url=portal_url,
    )
