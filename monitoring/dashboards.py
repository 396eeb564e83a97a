"""Dashboards from Prometheus: a team's GPUs, some pods' GPUs, a whole cluster, and a team's
utilisation as numbers for the API.

They put together the charts of ``monitoring.charts``, fetched at once and cached by
``monitoring.parts.Fetching``. A dashboard starts its queries and returns at once: what it
shows is made the first time the page reads it (``monitoring.parts.later``), so the view's other
reads and its template up to the charts happen while Prometheus answers.

The namespace every team query filters on is the team's slug, read from the database: nothing
from a request ever widens a query beyond what the caller already may see. And it is queried
only once the reconcile found it the portal's for the team (``metrics.confirmed_namespace``);
otherwise a dashboard is ``refused`` with the reason, and ``team_series`` raises
``NamespaceNotConfirmed``.

Dashboards never raise for Prometheus trouble: each chart carries the figure or the message to
show in its place. ``team_series``, behind the API, raises ``PrometheusError`` instead, which
the API answers with a 503.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from clusters import inventory
from clusters.models import Cluster
from monitoring import promql, selectors
from monitoring.charts import (
    NODES,
    PODS,
    Capacity,
    ModelGpus,
    capacity_part,
    gpu_parts,
    heatmap_part,
    held_part,
    held_ranking_part,
    pods_part,
    utilisation_ranking_part,
)
from monitoring.metrics import (
    NamespaceNotConfirmed,
    PodUsage,
    confirmed_namespace,
    metrics_config,
    pod_usage,
    prometheus_for,
)
from monitoring.parts import Chart, Fetching, dashboard_prometheus, later
from monitoring.prometheus import Series
from tenants.models import Team


@dataclass
class Dashboard:
    """Charts of a team's (or some pods') GPUs over a window, and the pods holding GPUs now."""

    cluster: Cluster
    window: promql.Window
    charts: list[Chart]
    pods: list[PodUsage] = field(default_factory=list)
    error: str = ""
    gpus_held: float | None = None  # GPU equivalents (a 1g.10gb slice: 1/7)
    gpus_granted: int | None = None  # units: GPUs, slices and replicas, one each
    gpu_equivalents_granted: float | None = None  # what the held GPUs are measured against
    refused: str = ""  # why nothing is read from the namespace (not confirmed as the team's)

    @property
    def idle_pods(self) -> list[PodUsage]:
        return [p for p in self.pods if p.idle]


def _first_error(charts: Sequence[Chart], *errors: str) -> str:
    return next((c.message for c in charts if c.failed), "") or next((e for e in errors if e), "")


def team_dashboard(*, team: Team, cluster: Cluster, window: promql.Window) -> Dashboard:
    """Utilisation, memory, power and temperature of the team's GPUs per pod, GPUs held vs
    granted (both GPU equivalents: a 1g.10gb slice is 1/7 of either), and the team's pods
    holding GPUs now with their idle verdict."""
    config = metrics_config(cluster)
    granted = selectors.gpus_granted_now(team=team, cluster=cluster)
    equivalents = selectors.gpu_equivalents_granted_now(team=team, cluster=cluster)
    try:
        namespace = confirmed_namespace(cluster=cluster, namespace=team.slug)
    except NamespaceNotConfirmed as refusal:
        return Dashboard(
            cluster=cluster,
            window=window,
            charts=[],
            refused=str(refusal),
            gpus_granted=granted,
            gpu_equivalents_granted=equivalents,
        )
    empty = f"No pod of {team} held GPUs on {cluster.name} in this window."
    prometheus = dashboard_prometheus(cluster)
    charts = [
        *gpu_parts(prometheus, config, window, namespace=namespace, pods=None, empty=empty),
        held_part(
            prometheus, config, window, namespace=namespace, granted=equivalents, empty=empty
        ),
    ]
    fetching = Fetching([*charts, pods_part(prometheus, cluster, namespace=namespace)])

    def finish(results: dict) -> Dashboard:
        pods, pods_error = results[PODS]
        drawn = [results[part.key] for part in charts]
        return Dashboard(
            cluster=cluster,
            window=window,
            charts=drawn,
            pods=pods,
            error=_first_error(drawn, pods_error),
            gpus_held=None if pods_error else sum(p.gpu_equivalents for p in pods),
            gpus_granted=granted,
            gpu_equivalents_granted=equivalents,
        )

    return later(fetching, finish)


def pod_dashboard(
    *,
    cluster: Cluster | str,
    namespace: str,
    pod_names: Sequence[str],
    window: promql.Window,
) -> Dashboard:
    """The team dashboard's charts for the GPUs some pods hold, one line per GPU.

    For callers that already decided the user may see these pods (the jobs app calls it with a
    job's cluster, its team's namespace and its pods' names).
    """
    if isinstance(cluster, str):
        cluster = Cluster.objects.get(name=cluster)
    pods = list(pod_names)
    try:
        namespace = confirmed_namespace(cluster=cluster, namespace=namespace)
    except NamespaceNotConfirmed as refusal:
        return Dashboard(cluster=cluster, window=window, charts=[], refused=str(refusal))
    if not pods:
        return Dashboard(cluster=cluster, window=window, charts=[])
    config = metrics_config(cluster)
    empty = f"No GPU held by {', '.join(pods)} in this window."
    prometheus = dashboard_prometheus(cluster)
    charts = gpu_parts(prometheus, config, window, namespace=namespace, pods=pods, empty=empty)
    fetching = Fetching([*charts, pods_part(prometheus, cluster, namespace=namespace)])

    def finish(results: dict) -> Dashboard:
        usage, usage_error = results[PODS]
        drawn = [results[part.key] for part in charts]
        mine = [p for p in usage if p.pod in pods]
        return Dashboard(
            cluster=cluster,
            window=window,
            charts=drawn,
            pods=mine,
            error=_first_error(drawn, usage_error),
            gpus_held=sum(p.gpu_equivalents for p in mine),
        )

    return later(fetching, finish)


# --- the cluster page ---------------------------------------------------------------------------


@dataclass
class ClusterDashboard:
    """The cluster page: its charts by key (each section of the page shows some of them), the
    GPU nodes and models, and what could not be read."""

    cluster: Cluster
    window: promql.Window
    charts: list[Chart]
    nodes: list[inventory.NodeGpus] = field(default_factory=list)
    models: list[ModelGpus] = field(default_factory=list)
    nodes_error: str = ""
    error: str = ""

    def _charts(self, *keys: str) -> list[Chart]:
        return [c for c in self.charts if c.key in keys]

    @property
    def capacity_charts(self) -> list[Chart]:
        return self._charts("nodes", "models")

    @property
    def heatmap_charts(self) -> list[Chart]:
        return self._charts("heatmap")

    @property
    def ranking_charts(self) -> list[Chart]:
        return self._charts("rank-held", "rank-utilisation")


def cluster_dashboard(*, cluster: Cluster, window: promql.Window) -> ClusterDashboard:
    """For admins: GPUs allocatable vs allocated per node and model, utilisation of every GPU
    over the window, and teams ranked by GPUs held now and by average utilisation.

    A new chart is one more part in ``charts`` below and a ``ClusterDashboard`` property naming
    its key for the section of the page that shows it."""
    config = metrics_config(cluster)
    prometheus = dashboard_prometheus(cluster)
    charts = [
        heatmap_part(prometheus, config, window, gpus=selectors.gpus_on_cluster(cluster)),
        held_ranking_part(cluster, prometheus, config),
        utilisation_ranking_part(cluster, prometheus, config, window),
    ]
    fetching = Fetching([capacity_part(cluster), *charts])

    def finish(results: dict) -> ClusterDashboard:
        capacity: Capacity = results[NODES]
        drawn = [*capacity.charts, *(results[part.key] for part in charts)]
        return ClusterDashboard(
            cluster=cluster,
            window=window,
            charts=drawn,
            nodes=capacity.nodes,
            models=capacity.models,
            nodes_error=capacity.error,
            error=next((c.message for c in drawn if c.failed and c.key != NODES), ""),
        )

    return later(fetching, finish)


# --- the API's numbers --------------------------------------------------------------------------


@dataclass
class TeamSeries:
    """A team's utilisation per pod over a window, as numbers (the API's answer)."""

    team: Team
    cluster: Cluster
    window: promql.Window
    step: int
    series: list[dict]
    pods: list[PodUsage]
    gpus_granted: int  # units (a slice or a replica counts one)
    gpu_equivalents_granted: float


def team_series(*, team: Team, cluster: Cluster, window: promql.Window) -> TeamSeries:
    """Raises ``NamespaceNotConfirmed`` when the team's namespace is not known to be the
    portal's, and ``PrometheusError`` when Prometheus cannot answer."""
    config = metrics_config(cluster)
    namespace = confirmed_namespace(cluster=cluster, namespace=team.slug)
    start, end = window.aligned()
    with prometheus_for(cluster) as prometheus:
        series = prometheus.query_range(
            promql.utilisation_by_pod(config, namespace=namespace),
            start=start,
            end=end,
            step=window.step,
        )
        pods = pod_usage(prometheus, cluster, namespace=namespace)
    return TeamSeries(
        team=team,
        cluster=cluster,
        window=window,
        step=window.step,
        series=[_series_json(s, config.labels.pod) for s in series],
        pods=pods,
        gpus_granted=selectors.gpus_granted_now(team=team, cluster=cluster),
        gpu_equivalents_granted=selectors.gpu_equivalents_granted_now(team=team, cluster=cluster),
    )


def _series_json(series: Series, pod_label: str) -> dict:
    return {
        "pod": series.labels.get(pod_label, ""),
        "points": [
            [t, None if math.isnan(v) else v]
            for t, v in zip(series.timestamps, series.values, strict=True)
        ],
    }
