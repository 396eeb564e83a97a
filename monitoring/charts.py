"""The charts of the monitoring pages, each a ``Part`` (``monitoring.parts``): the PromQL or
cluster read it runs and the Plotly figure (``monitoring.figures``) it turns the answer into.
A team's or some pods' GPUs over time, the pods holding GPUs now, and for the cluster page its
GPU nodes and models, the utilisation heatmap and the team rankings. ``monitoring.dashboards``
puts them together into pages."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.conf import settings

from clusters import inventory
from clusters.kube import KubeError
from clusters.models import Cluster
from monitoring import figures, promql
from monitoring.figures import Axis
from monitoring.metrics import (
    metrics_config,
    pod_usage,
    recording_rules_cover,
    unavailable_message,
)
from monitoring.parts import Chart, Part, aligned_span
from monitoring.prometheus import PrometheusClient, Series
from tenants.selectors import owned_namespace_team_names

UTILISATION_AXIS = Axis("Utilisation", "%", (0, 100))
MIB_PER_GIB = 1024


# --- a team's or some pods' GPUs over time -----------------------------------------------------


@dataclass(frozen=True)
class GaugeChart:
    """A DCGM gauge drawn per pod or per GPU: which metric, on what axis, scaled how, and to
    how many decimals (what a 320-pixel chart and its hover label can show)."""

    key: str
    title: str
    metric: str
    axis: Axis
    scale: float = 1.0
    decimals: int = 0


GAUGE_CHARTS = (
    GaugeChart(
        "memory",
        "Framebuffer memory used",
        promql.FB_USED,
        Axis("Memory", "GiB"),
        scale=1 / MIB_PER_GIB,
        decimals=1,
    ),
    GaugeChart("power", "Power draw", promql.POWER, Axis("Power", "W")),
    GaugeChart(
        "temperature", "Temperature (hottest GPU)", promql.TEMPERATURE, Axis("Temperature", "°C")
    ),
)
# Utilisation in whole percent: a pixel of a chart's height is a third of a percent.
UTILISATION_DECIMALS = 0


def _line_part(
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
    decimals: int,
) -> Part:
    """A line per series of a range query over the window."""
    start, end = aligned_span(window)
    step = window.step

    def fetch() -> list[Series]:
        return prometheus.query_range(query, start=start, end=end, step=step)

    def build(series: list[Series]) -> Chart:
        figure = None
        if series:
            figure = figures.time_series(
                series,
                title=title,
                axis=axis,
                name=name,
                scale=scale,
                decimals=decimals,
                x_range=(start, end),
            )
        return Chart.drawn(key, title, figure, empty=empty)

    return Part(
        key,
        ("line", prometheus.identity, key, title, query, start, end, step, scale, decimals, empty),
        fetch,
        build,
        lambda error: Chart.unavailable(key, title, error),
    )


def gpu_name(labels: dict) -> str:
    """A GPU's row or line: "gpu-node-0 · GPU 3"; a MIG instance's under its GPU's,
    "gpu-node-mig-0 · GPU 0 · 1g.10gb #1" (its profile and instance id), so that the natural
    order puts each GPU's slices right after it."""
    name = f"{labels.get(promql.NODE_LABEL, '?')} · GPU {labels.get(promql.GPU_LABEL, '?')}"
    profile = labels.get(promql.MIG_PROFILE_LABEL)
    if profile:
        name += f" · {profile} #{labels.get(promql.MIG_INSTANCE_LABEL, '?')}"
    return name


def gpu_parts(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
    *,
    namespace: str,
    pods: Sequence[str] | None,
    empty: str,
) -> list[Part]:
    """Utilisation, memory, power and temperature of the GPUs a namespace's pods hold: a line
    per pod, or, for the given ``pods``, a line per GPU or MIG instance they hold (on a shared
    GPU, their own share of it)."""
    if pods is None:
        per, by = "per pod", [config.labels.pod]
        utilisation = promql.utilisation_by_pod(config, namespace=namespace)

        def name(labels: dict) -> str:
            return labels.get(config.labels.pod, "?")

    else:
        per, by, name = "per GPU", list(promql.GPU_KEY), gpu_name
        utilisation = promql.utilisation_by_gpu(config, namespace=namespace, pods=pods)
    parts = [
        _line_part(
            prometheus,
            window,
            key="utilisation",
            title=f"GPU utilisation {per}",
            query=utilisation,
            axis=UTILISATION_AXIS,
            name=name,
            empty=empty,
            decimals=UTILISATION_DECIMALS,
        )
    ]
    for gauge in GAUGE_CHARTS:
        query = promql.gauge_by(gauge.metric, config, by, namespace=namespace, pods=pods)
        parts.append(
            _line_part(
                prometheus,
                window,
                key=gauge.key,
                title=f"{gauge.title} {per}",
                query=query,
                axis=gauge.axis,
                name=name,
                empty=empty,
                scale=gauge.scale,
                decimals=gauge.decimals,
            )
        )
    return parts


def held_part(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
    *,
    namespace: str,
    granted: float,
    empty: str,
) -> Part:
    """GPU equivalents the namespace held over the window under the ceiling of those granted
    (``selectors.gpu_equivalents_granted_now``): one unit on both sides of the line."""
    key, title = "held", "GPUs held vs granted (GPU equivalents)"
    query = promql.gpus_held(config, namespace=namespace)
    start, end = aligned_span(window)
    step = window.step

    def build(series: list[Series]) -> Chart:
        figure = figures.held_vs_granted(series, granted=granted, title=title, x_range=(start, end))
        return Chart.drawn(key, title, figure, empty=empty)

    return Part(
        key,
        ("held", prometheus.identity, query, start, end, step, granted, empty),
        lambda: prometheus.query_range(query, start=start, end=end, step=step),
        build,
        lambda error: Chart.unavailable(key, title, error),
    )


PODS = "pods"


def pods_part(prometheus: PrometheusClient, cluster: Cluster, *, namespace: str) -> Part:
    """The namespace's pods holding GPUs now with their idle verdict: (pods, error)."""
    return Part(
        PODS,
        (
            PODS,
            prometheus.identity,
            namespace,
            metrics_config(cluster),
            int(cluster.idle_window_minutes),
            float(cluster.idle_utilization_percent),
        ),
        lambda: pod_usage(prometheus, cluster, namespace=namespace),
        lambda usage: (usage, ""),
        lambda error: ([], unavailable_message(error)),
    )


# --- the cluster page ---------------------------------------------------------------------------


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
    teams = owned_namespace_team_names(cluster=cluster, among=namespaces)
    return {ns: teams.get(ns) or f"{ns} (no team)" for ns in namespaces}


@dataclass
class Capacity:
    """The cluster's GPU nodes, their models and the two charts of them, or why they could not
    be read."""

    nodes: list[inventory.NodeGpus]
    models: list[ModelGpus]
    charts: list[Chart]
    error: str = ""


NODES = "nodes"


def capacity_part(cluster: Cluster) -> Part:
    """GPUs allocatable vs allocated per node and per model, from the cluster's API."""
    resource_names = inventory.gpu_resource_names(cluster)

    def build(nodes: list[inventory.NodeGpus]) -> Capacity:
        models = gpus_by_model(nodes)
        if not nodes:
            message = "No GPU nodes match the cluster's GPU node selector."
            return Capacity(nodes, models, [Chart(NODES, "GPUs per node", message=message)])
        by_node = figures.allocation_bars(
            [n.name for n in nodes],
            allocatable=[n.gpus_allocatable for n in nodes],
            allocated=[n.gpus_allocated for n in nodes],
            title="GPUs allocatable vs allocated per node",
        )
        by_model = figures.allocation_bars(
            [m.gpu_model for m in models],
            allocatable=[m.allocatable for m in models],
            allocated=[m.allocated for m in models],
            title="GPUs allocatable vs allocated per GPU model",
        )
        charts = [
            Chart.drawn(NODES, "GPUs per node", by_node, empty=""),
            Chart.drawn("models", "GPUs per model", by_model, empty=""),
        ]
        return Capacity(nodes, models, charts)

    def failed(error: KubeError) -> Capacity:
        message = f"The cluster's nodes cannot be read right now. {error}"
        return Capacity(
            [], [], [Chart(NODES, "GPUs per node", message=message, failed=True)], message
        )

    return Part(
        NODES,
        (NODES, cluster.pk, cluster.gpu_node_selector, cluster.gpu_model_label, resource_names),
        lambda: inventory.gpu_nodes(cluster, resource_names=resource_names),
        build,
        failed,
        errors=(KubeError,),
    )


GPU_COUNT_AXIS = Axis("GPUs", "GPUs")


def band_name(labels: dict) -> str:
    """A utilisation band's row: "60-70%" (with an en dash)."""
    low = round(float(labels.get(promql.BAND_LABEL, "0")))
    return f"{low}–{low + promql.UTILISATION_BAND}%"


def every_band(series: list[Series]) -> list[Series]:
    """The bands' series with an empty one for each band no GPU was in during the window, so
    that the heatmap always has the same ten rows."""
    seen = {band_name(s.labels) for s in series}
    empty = [
        Series({promql.BAND_LABEL: str(low)}, [], [])
        for low in range(0, 100, promql.UTILISATION_BAND)
        if band_name({promql.BAND_LABEL: str(low)}) not in seen
    ]
    return [*series, *empty]


def heatmap_part(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
    *,
    gpus: int = 0,
) -> Part:
    """A row per GPU (node, index, MIG instance) of the cluster; on a cluster of more than
    ``MONITORING_HEATMAP_GPU_ROWS`` GPUs (``gpus``, as its nodes report them), a row per
    utilisation band counting its GPUs at each step, which Prometheus counts: thousands of rows
    would be megabytes that nobody could read."""
    key, title = "heatmap", "Utilisation heatmap"
    step = window.heatmap_step
    start, end = aligned_span(window, step)
    by_band = gpus > settings.MONITORING_HEATMAP_GPU_ROWS
    if by_band:
        query = promql.utilisation_bands(config)
        name, row, axis = "GPUs by utilisation band", band_name, GPU_COUNT_AXIS
    else:
        query = promql.utilisation_heatmap(config)
        name = "GPU utilisation by node, GPU and MIG instance"
        row, axis = gpu_name, UTILISATION_AXIS

    def build(series: list[Series]) -> Chart:
        figure = None
        if series:
            figure = figures.heatmap(
                every_band(series) if by_band else series,
                title=name,
                row=row,
                start=start,
                end=end,
                step=step,
                axis=axis,
            )
        empty = "Prometheus has no GPU utilisation for this cluster in this window."
        return Chart.drawn(key, title, figure, empty=empty)

    return Part(
        key,
        (key, prometheus.identity, query, start, end, step),
        lambda: prometheus.query_range(query, start=start, end=end, step=step),
        build,
        lambda error: Chart.unavailable(key, title, error),
    )


def _by_namespace(samples, config: promql.MetricsConfig) -> dict[str, float]:
    return {
        s.labels.get(config.labels.namespace, ""): s.value
        for s in samples
        if math.isfinite(s.value)
    }


# A ranking draws a bar per team up to this many; a company's 500 would be a chart 14,000
# pixels tall. Beyond it, the ends that matter are drawn (the usage report lists every team).
RANKED_TEAMS = 20


def ranking_ends(values: dict[str, float], *, highest: int, lowest: int) -> dict[str, float]:
    """The ``highest`` largest values and the ``lowest`` smallest (ties by name), or all of them
    when they are no more than that."""
    if len(values) <= highest + lowest:
        return values
    ordered = sorted(values.items(), key=lambda pair: (-pair[1], pair[0]))
    return dict(ordered[:highest] + (ordered[-lowest:] if lowest else []))


def _of_how_many(shown: int, teams: int, lowest: int) -> str:
    if shown == teams:
        return ""
    if lowest:
        return f": the {shown - lowest} highest and {lowest} lowest of {teams} teams"
    return f": the {shown} highest of {teams} teams"


def _ranking_part(
    cluster: Cluster,
    key: str,
    title: str,
    fetch: Callable[[], dict[str, float]],
    *,
    depends_on: tuple,
    figure_title: str,
    axis: Axis,
    decimals: int,
    empty: str,
    lowest: int = 0,
) -> Part:
    """Teams ranked by a value per namespace (``fetch``), each shown by its team's name: all of
    them, or on a cluster of more than ``RANKED_TEAMS`` teams the highest and (``lowest`` of
    them) the lowest, the title saying how many of how many."""

    def build(values: dict[str, float]) -> Chart:
        figure = None
        if values:
            shown = ranking_ends(values, highest=RANKED_TEAMS - lowest, lowest=lowest)
            names = _namespace_names(cluster, set(shown))
            figure = figures.ranking(
                [(names[ns], v) for ns, v in shown.items()],
                title=figure_title + _of_how_many(len(shown), len(values), lowest),
                axis=axis,
                decimals=decimals,
            )
        return Chart.drawn(key, title, figure, empty=empty)

    return Part(
        key,
        (key, *depends_on, figure_title, decimals),
        fetch,
        build,
        lambda error: Chart.unavailable(key, title, error),
    )


def utilisation_ranking_part(
    cluster: Cluster,
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
) -> Part:
    """Teams by average utilisation over the window: from the recording rules' few series when
    they cover the window, from every GPU's series otherwise."""
    start, end = aligned_span(window)

    def fetch() -> dict[str, float]:
        recorded = recording_rules_cover(prometheus, config, start=start, end=end)
        query = promql.average_utilisation_by_namespace(config, window, recorded=recorded)
        return _by_namespace(prometheus.query(query, at=end), config)

    return _ranking_part(
        cluster,
        "rank-utilisation",
        "Teams by average utilisation",
        fetch,
        depends_on=(prometheus.identity, config, window.seconds, end),
        figure_title="Average GPU utilisation over the window",
        axis=UTILISATION_AXIS,
        decimals=1,
        empty="No pod held a GPU in this window.",
        # The idlest teams are what an admin acts on: half the bars are theirs.
        lowest=RANKED_TEAMS // 2,
    )


def held_ranking_part(
    cluster: Cluster, prometheus: PrometheusClient, config: promql.MetricsConfig
) -> Part:
    """Teams by GPUs held now."""
    query = promql.gpus_held_by_namespace(config)
    return _ranking_part(
        cluster,
        "rank-held",
        "Teams by GPUs held",
        lambda: _by_namespace(prometheus.query(query), config),
        depends_on=(prometheus.identity, query),
        figure_title="GPUs held now",
        axis=Axis("GPUs"),
        decimals=0,
        empty="No pod holds a GPU right now.",
    )
