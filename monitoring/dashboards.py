"""Charts and dashboards from Prometheus: a team's GPUs, some pods' GPUs, a whole cluster,
and a team's utilisation as numbers for the API.

They build PromQL with ``monitoring.promql``, run it through ``monitoring.metrics``' client and
turn the results into Plotly figures with ``monitoring.figures``. The namespace every team query
filters on is the team's slug, read from the database: nothing from a request ever widens a
query beyond what the caller already may see. And it is queried only once the reconcile found
it the portal's for the team (``metrics.confirmed_namespace``); otherwise a dashboard is
``refused`` with the reason, and ``team_series`` raises ``NamespaceNotConfirmed``.

Dashboards never raise for Prometheus trouble: each chart carries the figure or the message to
show in its place. ``team_series``, behind the API, raises ``PrometheusError`` instead, which
the API answers with a 503.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from clusters import inventory
from clusters.kube import KubeError
from clusters.models import Cluster
from monitoring import figures, promql, selectors
from monitoring.figures import Axis
from monitoring.metrics import (
    NamespaceNotConfirmed,
    PodUsage,
    confirmed_namespace,
    metrics_config,
    pod_usage,
    prometheus_for,
    unavailable_message,
)
from monitoring.prometheus import PrometheusClient, PrometheusError, Series
from tenants.models import Team
from tenants.selectors import owned_namespaces

UTILISATION_AXIS = Axis("Utilisation", "%", (0, 100))
MIB_PER_GIB = 1024


@dataclass
class Chart:
    """One chart of a page: its figure, or the sentence to show in its place."""

    key: str
    title: str
    figure: dict | None = None
    message: str = ""
    failed: bool = False

    @property
    def script_id(self) -> str:
        return f"figure-{self.key}"


def _chart(key: str, title: str, build: Callable[[], dict | None], *, empty: str) -> Chart:
    try:
        figure = build()
    except PrometheusError as error:
        return Chart(key, title, message=unavailable_message(error), failed=True)
    if figure is None:
        return Chart(key, title, message=empty)
    return Chart(key, title, figure=figure)


@dataclass(frozen=True)
class GaugeChart:
    """A DCGM gauge drawn per pod or per GPU: which metric, on what axis, scaled how."""

    key: str
    title: str
    metric: str
    axis: Axis
    scale: float = 1.0


GAUGE_CHARTS = (
    GaugeChart(
        "memory", "Framebuffer memory used", promql.FB_USED, Axis("Memory", "GiB"), 1 / MIB_PER_GIB
    ),
    GaugeChart("power", "Power draw", promql.POWER, Axis("Power", "W")),
    GaugeChart(
        "temperature", "Temperature (hottest GPU)", promql.TEMPERATURE, Axis("Temperature", "°C")
    ),
)


@dataclass
class Dashboard:
    """Charts of a team's (or some pods') GPUs over a window, and the pods holding GPUs now."""

    cluster: Cluster
    window: promql.Window
    charts: list[Chart]
    pods: list[PodUsage] = field(default_factory=list)
    error: str = ""
    gpus_held: int | None = None
    gpus_granted: int | None = None
    refused: str = ""  # why nothing is read from the namespace (not confirmed as the team's)

    @property
    def idle_pods(self) -> list[PodUsage]:
        return [p for p in self.pods if p.idle]


def _first_error(charts: Sequence[Chart], *errors: str) -> str:
    return next((c.message for c in charts if c.failed), "") or next((e for e in errors if e), "")


def _line_chart(
    prometheus: PrometheusClient,
    window: promql.Window,
    *,
    key: str,
    title: str,
    query: str,
    axis: Axis,
    name: Callable[[dict], str],
    empty: str,
    scale: float = 1.0,
) -> Chart:
    """A line per series of a range query over the window."""
    start, end = window.aligned()

    def build():
        series = prometheus.query_range(query, start=start, end=end, step=window.step)
        if not series:
            return None
        return figures.time_series(
            series, title=title, axis=axis, name=name, scale=scale, x_range=(start, end)
        )

    return _chart(key, title, build, empty=empty)


def _gpu_name(labels: dict) -> str:
    return f"{labels.get(promql.NODE_LABEL, '?')}/{labels.get(promql.GPU_LABEL, '?')}"


def _gpu_charts(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
    *,
    namespace: str,
    pods: Sequence[str] | None,
    empty: str,
) -> list[Chart]:
    """Utilisation, memory, power and temperature of the GPUs a namespace's pods hold: a line
    per pod, or, for the given ``pods``, a line per GPU they hold."""
    if pods is None:
        per, by = "per pod", [config.labels.pod]
        utilisation = promql.utilisation_by_pod(config, namespace=namespace)

        def name(labels: dict) -> str:
            return labels.get(config.labels.pod, "?")

    else:
        per, by, name = "per GPU", [promql.NODE_LABEL, promql.GPU_LABEL], _gpu_name
        utilisation = promql.utilisation_by_gpu(config, namespace=namespace, pods=pods)
    charts = [
        _line_chart(
            prometheus,
            window,
            key="utilisation",
            title=f"GPU utilisation {per}",
            query=utilisation,
            axis=UTILISATION_AXIS,
            name=name,
            empty=empty,
        )
    ]
    for gauge in GAUGE_CHARTS:
        query = promql.gauge_by(gauge.metric, config, by, namespace=namespace, pods=pods)
        charts.append(
            _line_chart(
                prometheus,
                window,
                key=gauge.key,
                title=f"{gauge.title} {per}",
                query=query,
                axis=gauge.axis,
                name=name,
                empty=empty,
                scale=gauge.scale,
            )
        )
    return charts


def team_dashboard(*, team: Team, cluster: Cluster, window: promql.Window) -> Dashboard:
    """Utilisation, memory, power and temperature of the team's GPUs per pod, GPUs held vs
    granted, and the team's pods holding GPUs now with their idle verdict."""
    config = metrics_config(cluster)
    granted = selectors.gpus_granted_now(team=team, cluster=cluster)
    try:
        namespace = confirmed_namespace(cluster=cluster, namespace=team.slug)
    except NamespaceNotConfirmed as refusal:
        return Dashboard(
            cluster=cluster, window=window, charts=[], refused=str(refusal), gpus_granted=granted
        )
    start, end = window.aligned()
    empty = f"No pod of {team} held GPUs on {cluster.name} in this window."
    with prometheus_for(cluster) as prometheus:

        def held_figure():
            query = promql.gpus_held(config, namespace=namespace)
            series = prometheus.query_range(query, start=start, end=end, step=window.step)
            return figures.held_vs_granted(
                series, granted=granted, title="GPUs held vs granted", x_range=(start, end)
            )

        charts = _gpu_charts(
            prometheus, config, window, namespace=namespace, pods=None, empty=empty
        )
        charts.append(_chart("held", "GPUs held vs granted", held_figure, empty=empty))
        pods, pods_error = _pod_usage_or_error(prometheus, cluster, namespace=namespace)
    return Dashboard(
        cluster=cluster,
        window=window,
        charts=charts,
        pods=pods,
        error=_first_error(charts, pods_error),
        gpus_held=None if pods_error else sum(p.gpus for p in pods),
        gpus_granted=granted,
    )


def _pod_usage_or_error(
    prometheus: PrometheusClient, cluster: Cluster, *, namespace: str
) -> tuple[list[PodUsage], str]:
    try:
        return pod_usage(prometheus, cluster, namespace=namespace), ""
    except PrometheusError as error:
        return [], unavailable_message(error)


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
    with prometheus_for(cluster) as prometheus:
        charts = _gpu_charts(
            prometheus, config, window, namespace=namespace, pods=pods, empty=empty
        )
        usage, usage_error = _pod_usage_or_error(prometheus, cluster, namespace=namespace)
    mine = [p for p in usage if p.pod in pods]
    return Dashboard(
        cluster=cluster,
        window=window,
        charts=charts,
        pods=mine,
        error=_first_error(charts, usage_error),
        gpus_held=sum(p.gpus for p in mine),
    )


@dataclass(frozen=True)
class ModelGpus:
    """GPUs of one model across a cluster's nodes."""

    gpu_model: str
    nodes: int
    allocatable: int
    allocated: int

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.allocated)


@dataclass
class ClusterDashboard:
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


def gpus_by_model(nodes: Sequence[inventory.NodeGpus]) -> list[ModelGpus]:
    totals: dict[str, list[int]] = {}
    for node in nodes:
        row = totals.setdefault(node.gpu_model or "unknown model", [0, 0, 0])
        row[0] += 1
        row[1] += node.gpus_allocatable
        row[2] += node.gpus_allocated
    return [ModelGpus(model, *row) for model, row in sorted(totals.items())]


def _namespace_names(cluster: Cluster, namespaces: set[str]) -> dict[str, str]:
    """How to show each namespace: its team's name, or the bare namespace when it is not known
    as a team's (no team of that slug, or a namespace of that name someone else made)."""
    owned = owned_namespaces(cluster=cluster, among=namespaces)
    teams = dict(Team.objects.filter(slug__in=owned).values_list("slug", "name"))
    return {ns: teams.get(ns) or f"{ns} (no team)" for ns in namespaces}


def cluster_dashboard(*, cluster: Cluster, window: promql.Window) -> ClusterDashboard:
    """For admins: GPUs allocatable vs allocated per node and model, utilisation of every GPU
    over the window, and teams ranked by GPUs held now and by average utilisation."""
    config = metrics_config(cluster)
    charts: list[Chart] = []
    try:
        nodes = inventory.gpu_nodes(cluster)
        nodes_error = ""
    except KubeError as error:
        nodes, nodes_error = [], f"The cluster's nodes cannot be read right now. {error}"
    models = gpus_by_model(nodes)
    if nodes:
        charts.append(
            Chart(
                "nodes",
                "GPUs per node",
                figure=figures.allocation_bars(
                    [n.name for n in nodes],
                    allocatable=[n.gpus_allocatable for n in nodes],
                    allocated=[n.gpus_allocated for n in nodes],
                    title="GPUs allocatable vs allocated per node",
                ),
            )
        )
        charts.append(
            Chart(
                "models",
                "GPUs per model",
                figure=figures.allocation_bars(
                    [m.gpu_model for m in models],
                    allocatable=[m.allocatable for m in models],
                    allocated=[m.allocated for m in models],
                    title="GPUs allocatable vs allocated per GPU model",
                ),
            )
        )
    else:
        message = nodes_error or "No GPU nodes match the cluster's GPU node selector."
        charts.append(Chart("nodes", "GPUs per node", message=message, failed=bool(nodes_error)))

    with prometheus_for(cluster) as prometheus:

        def heatmap_figure():
            step = window.heatmap_step
            start, end = window.aligned(step)
            query = promql.utilisation_heatmap(config)
            series = prometheus.query_range(query, start=start, end=end, step=step)
            if not series:
                return None
            return figures.heatmap(
                series,
                title="GPU utilisation by node and GPU",
                row=_gpu_name,
                start=start,
                end=end,
                step=step,
                axis=UTILISATION_AXIS,
            )

        def ranked(query: str, at: float | None, *, title: str, axis: Axis, decimals: int):
            samples = prometheus.query(query, at=at)
            values = {
                s.labels.get(config.labels.namespace, ""): s.value
                for s in samples
                if not math.isnan(s.value)
            }
            if not values:
                return None
            names = _namespace_names(cluster, set(values))
            return figures.ranking(
                [(names[ns], v) for ns, v in values.items()],
                title=title,
                axis=axis,
                decimals=decimals,
            )

        _, window_end = window.aligned()
        charts.append(
            _chart(
                "heatmap",
                "Utilisation heatmap",
                heatmap_figure,
                empty="Prometheus has no GPU utilisation for this cluster in this window.",
            )
        )
        charts.append(
            _chart(
                "rank-held",
                "Teams by GPUs held",
                lambda: ranked(
                    promql.gpus_held_by_namespace(config),
                    None,
                    title="GPUs held now",
                    axis=Axis("GPUs"),
                    decimals=0,
                ),
                empty="No pod holds a GPU right now.",
            )
        )
        charts.append(
            _chart(
                "rank-utilisation",
                "Teams by average utilisation",
                lambda: ranked(
                    promql.average_utilisation_by_namespace(config, window),
                    window_end,
                    title="Average GPU utilisation over the window",
                    axis=UTILISATION_AXIS,
                    decimals=1,
                ),
                empty="No pod held a GPU in this window.",
            )
        )
    return ClusterDashboard(
        cluster=cluster,
        window=window,
        charts=charts,
        nodes=nodes,
        models=models,
        nodes_error=nodes_error,
        error=next((c.message for c in charts if c.failed and c.key != "nodes"), ""),
    )


@dataclass
class TeamSeries:
    """A team's utilisation per pod over a window, as numbers (the API's answer)."""

    team: Team
    cluster: Cluster
    window: promql.Window
    step: int
    series: list[dict]
    pods: list[PodUsage]
    gpus_granted: int


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
    )


def _series_json(series: Series, pod_label: str) -> dict:
    return {
        "pod": series.labels.get(pod_label, ""),
        "points": [
            [t, None if math.isnan(v) else v]
            for t, v in zip(series.timestamps, series.values, strict=True)
        ],
    }
