"""A cluster's GPU metrics: its Prometheus client, the PromQL settings its label layout needs,
the sentence shown when Prometheus cannot answer, whether a team's namespace may be read at all,
and the pods holding GPUs now with the idle verdict. Dashboards, the API, the idle check and the
usage report all start here.

A team's metrics are read from its namespace only once the reconcile found (or made) that
namespace the portal's for the team (``reconcile.namespaces``): a namespace of the same name made
by someone else is not the team's, and nothing in it is shown as theirs.

The idle rule itself is here (``pod_usage``), because the dashboards show its verdict as well
as the idle check acting on it; what the portal then does about an idle pod is ``idle``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clusters.models import Cluster
from core.validators import parse_label_matchers
from monitoring import pod_gpus, promql
from monitoring.prometheus import PrometheusClient, PrometheusError, PrometheusQueryError
from tenants.models import Team
from tenants.selectors import namespace_ownership


def metrics_config(cluster: Cluster) -> promql.MetricsConfig:
    # Plain strings, as the database returns them (a saved instance holds the choices' enum
    # members): the config is part of cache keys every process must spell the same.
    return promql.MetricsConfig(
        layout=str(cluster.metrics_label_layout),
        utilisation_metric=str(cluster.gpu_utilization_metric),
        exporter=parse_label_matchers(cluster.dcgm_exporter_selector),
        shared_nodes=promql.MetricsConfig.shared(cluster.shared_gpu_replicas or {}),
    )


def prometheus_for(cluster: Cluster, *, cache_seconds: float | None = None) -> PrometheusClient:
    """A client for the cluster's Prometheus (``PrometheusNotConfigured`` when it has none);
    its answers cached for ``cache_seconds`` (default ``MONITORING_CACHE_SECONDS``)."""
    return PrometheusClient(cluster.prometheus_url, cache_seconds=cache_seconds)


def recording_rules_cover(
    prometheus: PrometheusClient, config: promql.MetricsConfig, *, start: float, end: float
) -> bool:
    """Whether the portal's recording rules were recording from ``start`` to ``end`` (the
    series they keep say so). A Prometheus too old for the query's ``@`` says no."""
    try:
        query = promql.recording_rules_cover(config, start=start, end=end)
        return bool(prometheus.query(query, at=end))
    except PrometheusQueryError:
        return False


def unavailable_message(error: PrometheusError) -> str:
    return f"GPU metrics are unavailable right now. {error}"


class NamespaceNotConfirmed(Exception):
    """The team's namespace on the cluster is not known to be the portal's: no metrics are read
    from it. The message says why, for the page or the API's 409."""


def confirmed_namespace(*, cluster: Cluster, namespace: str) -> str:
    """``namespace`` (a team's slug), once the last reconcile found it the portal's on the
    cluster; raises ``NamespaceNotConfirmed`` otherwise."""
    owned = namespace_ownership(cluster=cluster, namespace=namespace)
    if owned is True:
        return namespace
    if owned is False:
        raise NamespaceNotConfirmed(
            f"Namespace {namespace} on cluster {cluster.name} was not created by the portal for "
            f"team {namespace}, so no GPU metrics are shown from it. A cluster admin must delete "
            "or rename it (or the team needs another slug)."
        )
    raise NamespaceNotConfirmed(
        f"The portal has not confirmed namespace {namespace} on cluster {cluster.name} as team "
        f"{namespace}'s yet, so no GPU metrics are shown from it. It does once the team's quota "
        "has been applied there."
    )


@dataclass(frozen=True)
class PodUsage:
    """A pod holding GPUs now: how many units (whole GPUs, MIG slices, replicas of a shared
    GPU: ``gpus``) of which kinds (``holdings``), and their average utilisation over the
    cluster's idle window (None while the pod is younger than the window). Idle when that is
    under the cluster's threshold."""

    namespace: str
    pod: str
    gpus: int
    average_utilisation: float | None
    idle: bool
    holdings: tuple[pod_gpus.Holding, ...] = ()

    @property
    def gpu_equivalents(self) -> float:
        """What the pod holds as GPU equivalents (a 1g.10gb slice: 1/7): what adds up."""
        return pod_gpus.gpu_equivalents(self.holdings) if self.holdings else float(self.gpus)

    @property
    def gpus_described(self) -> str:
        """What the pod holds in words: "2 GPUs", "1 x 1g.10gb slice (1/7 GPU)"."""
        if not self.holdings:
            return pod_gpus.Holding(pod_gpus.WHOLE, self.gpus).describe()
        return pod_gpus.describe(self.holdings)


def pod_usage(
    prometheus: PrometheusClient,
    cluster: Cluster,
    *,
    namespace: str | None = None,
    at: float | None = None,
) -> list[PodUsage]:
    """Every pod holding GPUs on the cluster (or in one namespace), judged by the idle rule."""
    config = metrics_config(cluster)
    labels = config.labels
    kinds = prometheus.query(promql.pod_gpu_kinds(config, namespace=namespace), at=at)
    averages = prometheus.query(
        promql.pod_average_utilisation(
            config, window_minutes=cluster.idle_window_minutes, namespace=namespace
        ),
        at=at,
    )

    def key(sample) -> tuple[str, str]:
        return sample.labels.get(labels.namespace, ""), sample.labels.get(labels.pod, "")

    average_by_pod = {key(s): s.value for s in averages if not math.isnan(s.value)}
    holdings = pod_gpus.holdings_by_pod(
        ((s.labels, s.value) for s in kinds),
        pod_key=(labels.namespace, labels.pod),
        node_label=promql.NODE_LABEL,
        model_label=promql.MODEL_LABEL,
        profile_label=promql.MIG_PROFILE_LABEL,
        shared_nodes={node: r for r, nodes in config.shared_nodes for node in nodes},
    )
    usage = []
    for (namespace_, pod), held in holdings.items():
        average = average_by_pod.get((namespace_, pod))
        usage.append(
            PodUsage(
                namespace=namespace_,
                pod=pod,
                gpus=sum(h.count for h in held),
                average_utilisation=average,
                idle=average is not None and average < cluster.idle_utilization_percent,
                holdings=held,
            )
        )
    return sorted(usage, key=lambda p: (p.namespace, p.pod))


def team_pod_usage(*, team: Team, cluster: Cluster) -> list[PodUsage]:
    """The team's pods holding GPUs now. Raises ``NamespaceNotConfirmed`` and
    ``PrometheusError``."""
    namespace = confirmed_namespace(cluster=cluster, namespace=team.slug)
    with prometheus_for(cluster) as prometheus:
        return pod_usage(prometheus, cluster, namespace=namespace)
