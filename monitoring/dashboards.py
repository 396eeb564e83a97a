"""Charts and dashboards from Prometheus: a team's GPUs, some pods' GPUs, a whole cluster,
and a team's utilisation as numbers for the API.

They build PromQL with ``monitoring.promql``, run it through ``monitoring.metrics``' client and
turn the results into Plotly figures with ``monitoring.figures``. The namespace every team query
filters on is the team's slug, read from the database: nothing from a request ever widens a
query beyond what the caller already may see. And it is queried only once the reconcile found
it the portal's for the team (``metrics.confirmed_namespace``); otherwise a dashboard is
``refused`` with the reason, and ``team_series`` raises ``NamespaceNotConfirmed``.

A page is a list of ``Part``\\ s (a chart, the pods table, the node inventory). Their queries run
concurrently, so a page waits for its slowest query rather than for the sum of them; each result
is turned into what the page shows as soon as it arrives, while the others are still in flight.
What a part made (a chart's compact figure JSON, the pods) is kept in Django's cache for
``MONITORING_CACHE_SECONDS`` under a key naming everything it depends on, so the same page asked
again within that time (by anyone, from any web worker when the cache is shared) runs no query.

Dashboards never raise for Prometheus trouble: each chart carries the figure or the message to
show in its place. ``team_series``, behind the API, raises ``PrometheusError`` instead, which
the API answers with a 503.
"""

from __future__ import annotations

import contextvars
import hashlib
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

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
from monitoring.prometheus import PrometheusClient, PrometheusError, PrometheusQueryError, Series
from tenants.models import Team
from tenants.selectors import owned_namespaces

UTILISATION_AXIS = Axis("Utilisation", "%", (0, 100))
MIB_PER_GIB = 1024
# Part of every cache key: bump it when what a part keeps in the cache changes shape.
CACHE_VERSION = 1


@dataclass
class Chart:
    """One chart of a page: its figure (as the compact JSON pages send), or the sentence to
    show in its place."""

    key: str
    title: str
    figure_json: str = ""
    message: str = ""
    failed: bool = False

    @classmethod
    def drawn(cls, key: str, title: str, figure: dict | None, *, empty: str) -> Chart:
        """The chart of ``figure``, or the ``empty`` sentence when there is nothing to draw."""
        if figure is None:
            return cls(key, title, message=empty)
        return cls(key, title, figure_json=figures.to_json(figure))

    @classmethod
    def unavailable(cls, key: str, title: str, error: PrometheusError) -> Chart:
        return cls(key, title, message=unavailable_message(error), failed=True)

    @property
    def script_id(self) -> str:
        return f"figure-{self.key}"

    @property
    def figure_script(self) -> SafeString:
        """The figure in a ``<script type="application/json">`` block, as ``json_script``
        writes one (``figures.to_json`` escaped what could close it)."""
        return format_html(
            '<script id="{}" type="application/json">{}</script>',
            self.script_id,
            mark_safe(self.figure_json),
        )


# --- parts of a page, fetched concurrently and cached ------------------------------------------


# The threads that fetch parts: one pool per process, started once (starting threads for every
# page cost more than some of its queries), made again in a forked child, which inherits the
# pool but not its threads. Pages share it: at most FETCH_THREADS queries of this process are in
# flight at once, the rest wait their turn.
FETCH_THREADS = 16
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _pools_lock:
        if pid not in _pools:
            _pools.clear()
            _pools[pid] = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="monitoring")
        return _pools[pid]


@dataclass(frozen=True)
class Part:
    """One piece of a page.

    ``fetch`` runs in a worker thread and talks only to Prometheus or the cluster's API, never
    to the database (a thread would open a connection of its own and keep it). ``build`` turns
    what it fetched into what the page shows, in the request's thread; ``failed`` says what to
    show instead when the fetch raised one of ``errors``. ``depends_on`` names everything the
    result depends on: it is the cache key.
    """

    key: str
    depends_on: tuple
    fetch: Callable[[], Any]
    build: Callable[[Any], Any]
    failed: Callable[[Exception], Any]
    errors: tuple[type[Exception], ...] = (PrometheusError,)

    @property
    def cache_key(self) -> str:
        digest = hashlib.sha256(repr((CACHE_VERSION, self.depends_on)).encode()).hexdigest()
        return f"monitoring:part:{digest}"


def resolve(parts: Sequence[Part]) -> dict[str, Any]:
    """Each part's result by key: from the cache, or fetched (all at once) and built.

    Failures are never cached: a Prometheus that is back is asked again at once.
    """
    seconds = settings.MONITORING_CACHE_SECONDS
    results: dict[str, Any] = {}
    if seconds > 0:
        found = cache.get_many([part.cache_key for part in parts])
        results = {part.key: found[part.cache_key] for part in parts if part.cache_key in found}
    missing = [part for part in parts if part.key not in results]
    fresh: dict[str, Any] = {}
    # Each fetch in a copy of this context: monitoring.prometheus.record_queries sees it.
    futures = {_pool().submit(contextvars.copy_context().run, part.fetch): part for part in missing}
    for future in as_completed(futures):
        part = futures[future]
        try:
            fetched = future.result()
        except part.errors as error:
            results[part.key] = part.failed(error)
        else:
            results[part.key] = fresh[part.cache_key] = part.build(fetched)
    if fresh and seconds > 0:
        cache.set_many(fresh, timeout=seconds)
    return results


def _dashboard_prometheus(cluster: Cluster) -> PrometheusClient:
    """The cluster's client without its own cache: ``resolve`` caches what the parts made,
    from the request's thread (a cache client per worker thread would be a connection each)."""
    return prometheus_for(cluster, cache_seconds=0)


def _span(window: promql.Window, step: int | None = None) -> tuple[float, float]:
    """The window's start and end on its step's grid, the end held for the cache's lifetime so
    that everyone asking within it asks (and caches) the same queries."""
    return window.aligned(step, every=settings.MONITORING_CACHE_SECONDS)


# --- charts over time ---------------------------------------------------------------------------


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
    start, end = _span(window)
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


def _gpu_name(labels: dict) -> str:
    return f"{labels.get(promql.NODE_LABEL, '?')}/{labels.get(promql.GPU_LABEL, '?')}"


def _gpu_parts(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
    *,
    namespace: str,
    pods: Sequence[str] | None,
    empty: str,
) -> list[Part]:
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


def _held_part(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
    *,
    namespace: str,
    granted: int,
    empty: str,
) -> Part:
    key, title = "held", "GPUs held vs granted"
    query = promql.gpus_held(config, namespace=namespace)
    start, end = _span(window)
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


def _pods_part(prometheus: PrometheusClient, cluster: Cluster, *, namespace: str) -> Part:
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
    empty = f"No pod of {team} held GPUs on {cluster.name} in this window."
    prometheus = _dashboard_prometheus(cluster)
    charts = [
        *_gpu_parts(prometheus, config, window, namespace=namespace, pods=None, empty=empty),
        _held_part(prometheus, config, window, namespace=namespace, granted=granted, empty=empty),
    ]
    results = resolve([*charts, _pods_part(prometheus, cluster, namespace=namespace)])
    pods, pods_error = results[PODS]
    drawn = [results[part.key] for part in charts]
    return Dashboard(
        cluster=cluster,
        window=window,
        charts=drawn,
        pods=pods,
        error=_first_error(drawn, pods_error),
        gpus_held=None if pods_error else sum(p.gpus for p in pods),
        gpus_granted=granted,
    )


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
    prometheus = _dashboard_prometheus(cluster)
    charts = _gpu_parts(prometheus, config, window, namespace=namespace, pods=pods, empty=empty)
    results = resolve([*charts, _pods_part(prometheus, cluster, namespace=namespace)])
    usage, usage_error = results[PODS]
    drawn = [results[part.key] for part in charts]
    mine = [p for p in usage if p.pod in pods]
    return Dashboard(
        cluster=cluster,
        window=window,
        charts=drawn,
        pods=mine,
        error=_first_error(drawn, usage_error),
        gpus_held=sum(p.gpus for p in mine),
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


@dataclass
class Capacity:
    """The cluster's GPU nodes, their models and the two charts of them, or why they could not
    be read."""

    nodes: list[inventory.NodeGpus]
    models: list[ModelGpus]
    charts: list[Chart]
    error: str = ""


NODES = "nodes"


def _capacity_part(cluster: Cluster) -> Part:
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


def _heatmap_part(
    prometheus: PrometheusClient, config: promql.MetricsConfig, window: promql.Window
) -> Part:
    key, title = "heatmap", "Utilisation heatmap"
    step = window.heatmap_step
    start, end = _span(window, step)
    query = promql.utilisation_heatmap(config)

    def build(series: list[Series]) -> Chart:
        figure = None
        if series:
            figure = figures.heatmap(
                series,
                title="GPU utilisation by node and GPU",
                row=_gpu_name,
                start=start,
                end=end,
                step=step,
                axis=UTILISATION_AXIS,
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
) -> Part:
    """Teams ranked by a value per namespace (``fetch``), each shown by its team's name."""

    def build(values: dict[str, float]) -> Chart:
        figure = None
        if values:
            names = _namespace_names(cluster, set(values))
            figure = figures.ranking(
                [(names[ns], v) for ns, v in values.items()],
                title=figure_title,
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


def _utilisation_ranking_part(
    cluster: Cluster,
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    window: promql.Window,
) -> Part:
    """Teams by average utilisation over the window: from the recording rules' few series when
    they cover the window, from every GPU's series otherwise."""
    start, end = _span(window)

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
    )


def _held_ranking_part(
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


def cluster_dashboard(*, cluster: Cluster, window: promql.Window) -> ClusterDashboard:
    """For admins: GPUs allocatable vs allocated per node and model, utilisation of every GPU
    over the window, and teams ranked by GPUs held now and by average utilisation.

    A new chart is one more part in ``charts`` below and a ``ClusterDashboard`` property naming
    its key for the section of the page that shows it."""
    config = metrics_config(cluster)
    prometheus = _dashboard_prometheus(cluster)
    charts = [
        _heatmap_part(prometheus, config, window),
        _held_ranking_part(cluster, prometheus, config),
        _utilisation_ranking_part(cluster, prometheus, config, window),
    ]
    results = resolve([_capacity_part(cluster), *charts])
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
