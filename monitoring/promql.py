"""PromQL for DCGM metrics: pure builders, no I/O.

Every aggregation happens in Prometheus (sum/avg/count by namespace, node, pod), so the portal
only ever moves a bounded number of series and points. Two things vary per cluster:

* the label layout: DCGM exporter's own ``namespace``/``pod``/``container`` labels, or
  ``exported_namespace``/``exported_pod``/``exported_container`` when Prometheus scrapes the
  exporter without ``honor_labels`` and renames them;
* the utilisation metric: ``DCGM_FI_DEV_GPU_UTIL`` in percent, or
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, a 0-1 ratio (also valid for MIG slices) scaled to percent.

Every DCGM selector also carries the cluster's exporter pin (``MetricsConfig.exporter``, label
matchers such as ``job="dcgm-exporter"``): Prometheus may scrape other sources that publish the
same metric names, a tenant's pod among them, with any namespace and pod labels it likes; only
the exporter's series may count for charts, idle detection and usage.

Label values that come from the portal (a team's slug, a pod name) are escaped here; nothing a
request sends is ever pasted into a query unescaped.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.validators import LabelMatcher

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
POWER = "DCGM_FI_DEV_POWER_USAGE"
TEMPERATURE = "DCGM_FI_DEV_GPU_TEMP"
RATIO_METRICS = frozenset({GR_ENGINE_ACTIVE})

# The DCGM exporter's labels for the GPU itself; these never move with the layout.
NODE_LABEL = "Hostname"
GPU_LABEL = "gpu"
MODEL_LABEL = "modelName"

LAYOUT_NAMESPACE = "namespace"
LAYOUT_EXPORTED = "exported"

# Chart resolution: no line gets more than MAX_POINTS points, a heatmap row no more than
# HEATMAP_COLUMNS cells (a heatmap is rows x columns cells, so it gets a coarser step).
MAX_POINTS = 1000
HEATMAP_COLUMNS = 240
# Steps a window may get, smallest first: round numbers a reader recognises on an axis.
NICE_STEPS_SECONDS = (
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
)


@dataclass(frozen=True)
class Labels:
    """The label names that carry the pod holding a GPU, in one cluster's layout."""

    namespace: str
    pod: str
    container: str

    @classmethod
    def for_layout(cls, layout: str) -> Labels:
        if layout == LAYOUT_EXPORTED:
            return cls("exported_namespace", "exported_pod", "exported_container")
        if layout == LAYOUT_NAMESPACE:
            return cls("namespace", "pod", "container")
        raise ValueError(f"unknown metrics label layout {layout!r}")


@dataclass(frozen=True)
class MetricsConfig:
    """What a cluster's Prometheus calls things: its label layout and utilisation metric, and
    the label matchers that pick the DCGM exporter's series out of everything it scrapes."""

    layout: str = LAYOUT_NAMESPACE
    utilisation_metric: str = GPU_UTIL
    exporter: tuple[LabelMatcher, ...] = ()

    def __post_init__(self) -> None:
        Labels.for_layout(self.layout)  # refuse an unknown layout early
        if self.utilisation_metric not in (GPU_UTIL, GR_ENGINE_ACTIVE):
            raise ValueError(f"unknown utilisation metric {self.utilisation_metric!r}")

    @property
    def labels(self) -> Labels:
        return Labels.for_layout(self.layout)

    @property
    def utilisation_is_ratio(self) -> bool:
        return self.utilisation_metric in RATIO_METRICS


# --- windows and steps -----------------------------------------------------------------------


def step_for(seconds: float, max_points: int = MAX_POINTS) -> int:
    """The smallest nice step that keeps a window of ``seconds`` within ``max_points`` points
    (a range query returns ``window / step + 1`` of them)."""
    if seconds <= 0:
        raise ValueError("a window must last longer than zero seconds")
    needed = seconds / max(1, max_points - 1)
    for step in NICE_STEPS_SECONDS:
        if step >= needed:
            return step
    return math.ceil(needed / 86400) * 86400


@dataclass(frozen=True)
class Window:
    """A time range to chart: [start, end] in UTC, and the range-query step that bounds it."""

    start: datetime.datetime
    end: datetime.datetime
    label: str = "custom"

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("window bounds must be timezone-aware")
        if self.end <= self.start:
            raise ValueError("a window must end after it starts")

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    @property
    def step(self) -> int:
        return step_for(self.seconds)

    @property
    def heatmap_step(self) -> int:
        return step_for(self.seconds, HEATMAP_COLUMNS)

    def range_selector(self) -> str:
        """The window as a PromQL range duration, e.g. ``[3600s]``."""
        return f"[{duration(self.seconds)}]"

    def aligned(self, step: int | None = None, *, every: float = 0) -> tuple[float, float]:
        """Start and end as unix seconds on the grid of the step: the end rounded down to a
        whole step (or to a whole multiple of the step that lasts at least ``every`` seconds),
        the start up to one. The same window asked twice within that time is the same query
        (and hits the cache), and every chart of a page has its points at the same times."""
        step = step or self.step
        granule = step * max(1, math.ceil(every / step))
        end = math.floor(self.end.timestamp() / granule) * granule
        start = max(math.ceil((end - self.seconds) / step) * step, 0)
        return float(start), float(end)


PRESET_WINDOWS = {
    "1h": datetime.timedelta(hours=1),
    "6h": datetime.timedelta(hours=6),
    "24h": datetime.timedelta(hours=24),
    "7d": datetime.timedelta(days=7),
}


def preset_window(name: str, now: datetime.datetime) -> Window:
    return Window(start=now - PRESET_WINDOWS[name], end=now, label=name)


def duration(seconds: float) -> str:
    """A PromQL duration in whole seconds (at least 1s)."""
    return f"{max(1, round(seconds))}s"


# --- selectors -------------------------------------------------------------------------------


def quote(value: str) -> str:
    """A PromQL string literal: double quotes, backslash and newline escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def regex_alternatives(values: Iterable[str]) -> str:
    """An RE2 pattern matching exactly one of ``values`` (each escaped)."""
    return "|".join(re.escape(v) for v in sorted(set(values)))


def selector(
    metric: str,
    config: MetricsConfig,
    *,
    namespace: str | None = None,
    namespaces: Sequence[str] | None = None,
    pods: Sequence[str] | None = None,
    held: bool = False,
) -> str:
    """``metric{...}`` of the cluster's DCGM exporter, narrowed to a namespace (or several), some
    pods, or every GPU a pod holds.

    ``held`` keeps only GPUs attributed to a pod (the namespace label is set); it is implied by
    any namespace filter.
    """
    labels = config.labels
    matchers = _exporter_matchers(config)
    if namespace is not None:
        matchers.append(f"{labels.namespace}={quote(namespace)}")
    elif namespaces is not None:
        if not namespaces:
            raise ValueError("an empty namespace list matches nothing; do not query")
        matchers.append(f"{labels.namespace}=~{quote(regex_alternatives(namespaces))}")
    elif held:
        matchers.append(f'{labels.namespace}!=""')
    if pods is not None:
        if not pods:
            raise ValueError("an empty pod list matches nothing; do not query")
        if len(pods) == 1:
            matchers.append(f"{labels.pod}={quote(pods[0])}")
        else:
            matchers.append(f"{labels.pod}=~{quote(regex_alternatives(pods))}")
    return f"{metric}{{{','.join(matchers)}}}"


def _exporter_matchers(config: MetricsConfig) -> list[str]:
    return [f"{m.label}{m.operator}{quote(m.value)}" for m in config.exporter]


def percent(expression: str, config: MetricsConfig) -> str:
    """Utilisation in percent: a ratio metric's expression times 100, a percent one as is."""
    return f"({expression}) * 100" if config.utilisation_is_ratio else expression


def _by(*labels: str) -> str:
    return f"by ({', '.join(labels)})"


# --- utilisation over time -------------------------------------------------------------------


def utilisation(config: MetricsConfig, aggregation: str, by: Sequence[str], **filters) -> str:
    """``aggregation by (by) (utilisation)`` in percent, over the GPUs ``filters`` select."""
    inner = selector(config.utilisation_metric, config, **filters)
    return percent(f"{aggregation} {_by(*by)} ({inner})", config)


def utilisation_by_pod(config: MetricsConfig, *, namespace: str) -> str:
    """Average utilisation of each pod's GPUs in one namespace, in percent."""
    return utilisation(config, "avg", [config.labels.pod], namespace=namespace, held=True)


def utilisation_by_gpu(config: MetricsConfig, *, namespace: str, pods: Sequence[str]) -> str:
    """Utilisation of each GPU (node and index) that the given pods hold, in percent."""
    return utilisation(
        config, "max", [NODE_LABEL, GPU_LABEL], namespace=namespace, pods=pods, held=True
    )


def utilisation_heatmap(config: MetricsConfig) -> str:
    """Utilisation of every GPU of the cluster, one series per (node, GPU), held or not."""
    return utilisation(config, "max", [NODE_LABEL, GPU_LABEL])


def team_average_utilisation(config: MetricsConfig, *, namespace: str) -> str:
    """Average utilisation over all GPUs a namespace holds, one series."""
    inner = selector(config.utilisation_metric, config, namespace=namespace)
    return percent(f"avg({inner})", config)


# --- other DCGM gauges -----------------------------------------------------------------------

# Per pod: memory and power add up over a pod's GPUs; temperature is the hottest GPU.
GAUGE_AGGREGATION = {FB_USED: "sum", POWER: "sum", TEMPERATURE: "max"}


def gauge_by(
    metric: str, config: MetricsConfig, by: Sequence[str], *, namespace: str, pods=None
) -> str:
    aggregation = GAUGE_AGGREGATION[metric]
    inner = selector(metric, config, namespace=namespace, pods=pods, held=True)
    return f"{aggregation} {_by(*by)} ({inner})"


# --- GPUs held -------------------------------------------------------------------------------


def gpus_held(config: MetricsConfig, *, namespace: str) -> str:
    """How many GPUs a namespace's pods hold (GPUs whose series carry its namespace)."""
    inner = selector(config.utilisation_metric, config, namespace=namespace)
    return f"count({inner}) or vector(0)"


def gpus_held_by_namespace(config: MetricsConfig) -> str:
    """GPUs held right now, per namespace."""
    inner = selector(config.utilisation_metric, config, held=True)
    return f"count {_by(config.labels.namespace)} ({inner})"


def average_utilisation_by_namespace(
    config: MetricsConfig, window: Window, *, recorded: bool = False
) -> str:
    """Each namespace's average utilisation over the window (an instant query at its end),
    weighted by GPU time: every sample of every GPU it held counts once, so a pod that ran for
    ten minutes weighs a tenth of one that ran for a hundred.

    With ``recorded`` (see ``recording_rules``), from the per-namespace sums and counts the
    portal's recording rules keep: a handful of series instead of every GPU's, which keeps a
    7-day window over thousands of GPUs within Prometheus' sample limit. Both give the same
    figure where the rules sample as often as the GPUs are scraped.
    """
    by = _by(config.labels.namespace)
    over = window.range_selector()
    if recorded:
        total = f"sum_over_time({recorded_utilisation_sum(config)}{over})"
        samples = f"sum_over_time({recorded_gpus_held(config)}{over})"
        return percent(f"{total} / {samples}", config)
    inner = selector(config.utilisation_metric, config, held=True)
    total = f"sum {by} (sum_over_time({inner}{over}))"
    samples = f"sum {by} (count_over_time({inner}{over}))"
    return percent(f"{total} / {samples}", config)


# --- recording rules -------------------------------------------------------------------------

# The series the rules below record carry this name and these labels once they are loaded, so
# that the portal can tell whether they were recording over a window (``recording_rules_cover``).
# Bump the version when a rule's meaning changes: series recorded under the old one are not used.
RECORDING_RULES_SERIES = "gpu_portal_recording_rules"
RECORDING_RULES_VERSION = "1"


def _recorded(config: MetricsConfig, operation: str) -> str:
    """A recorded series' name, ``level:metric:operation`` as Prometheus' naming convention
    has it; the level is the namespace label of the cluster's layout."""
    return f"{config.labels.namespace}:{config.utilisation_metric.lower()}:{operation}"


def recorded_utilisation_sum(config: MetricsConfig) -> str:
    """Per namespace, the sum of its GPUs' utilisation (in the metric's own unit)."""
    return _recorded(config, "sum")


def recorded_gpus_held(config: MetricsConfig) -> str:
    """Per namespace, how many GPUs its pods hold."""
    return _recorded(config, "count")


def recording_rules_labels(config: MetricsConfig) -> dict[str, str]:
    """What the recorded series were made from: the layout, the metric, the exporter pin (sums
    over unpinned series could count a tenant's forged ones) and the rules' version."""
    return {
        "layout": config.layout,
        "utilisation_metric": config.utilisation_metric,
        "exporter": ",".join(_exporter_matchers(config)),
        "version": RECORDING_RULES_VERSION,
    }


def recording_rules(config: MetricsConfig) -> list[dict]:
    """Prometheus recording rules (``record``/``expr`` dicts) for the cluster's layout and
    metric: per namespace, the utilisation summed over its GPUs and the GPUs counted, at each
    evaluation; and a constant series saying the rules were loaded."""
    held = selector(config.utilisation_metric, config, held=True)
    by = _by(config.labels.namespace)
    return [
        {"record": recorded_utilisation_sum(config), "expr": f"sum {by} ({held})"},
        {"record": recorded_gpus_held(config), "expr": f"count {by} ({held})"},
        {
            "record": RECORDING_RULES_SERIES,
            "expr": "vector(1)",
            "labels": recording_rules_labels(config),
        },
    ]


def recording_rules_cover(config: MetricsConfig, *, start: float, end: float) -> str:
    """An instant query with one sample when the portal's rules (this version, for this layout
    and metric) were recording at both ``start`` and ``end``, none otherwise. Rules begin to
    record when they are loaded (or from where ``promtool tsdb create-blocks-from rules``
    backfilled them), so a window that starts earlier must use the raw series."""
    matchers = ",".join(f"{k}={quote(v)}" for k, v in recording_rules_labels(config).items())
    series = f"{RECORDING_RULES_SERIES}{{{matchers}}}"
    return f"{series} @ {start:.3f} and {series} @ {end:.3f}"


# --- idle pods -------------------------------------------------------------------------------


def pod_average_utilisation(
    config: MetricsConfig, *, window_minutes: int, namespace: str | None = None
) -> str:
    """Per pod holding GPUs now, the average utilisation of its GPUs over the idle window, in
    percent; only pods that already held them a whole window ago, so a pod is never judged on
    its first minutes. Labels: namespace, pod (in the cluster's layout)."""
    labels = config.labels
    filters = {"namespace": namespace} if namespace is not None else {"held": True}
    series = selector(config.utilisation_metric, config, **filters)
    window = f"{window_minutes}m"
    pod_key = _by(labels.namespace, labels.pod)
    on = f"on ({labels.namespace}, {labels.pod})"
    average = percent(f"avg {pod_key} (avg_over_time({series}[{window}]))", config)
    return f"({average}) and {on} ({series}) and {on} ({series} offset {window})"


def pod_gpu_count(config: MetricsConfig, *, namespace: str | None = None) -> str:
    """GPUs each pod holds now. Labels: namespace, pod."""
    labels = config.labels
    filters = {"namespace": namespace} if namespace is not None else {"held": True}
    series = selector(config.utilisation_metric, config, **filters)
    return f"count {_by(labels.namespace, labels.pod)} ({series})"


def idle_rule_expression(
    config: MetricsConfig, *, threshold_percent: float, window_minutes: int, namespace=None
) -> str:
    """The LowGPUUsage alert's expression: pods whose GPUs averaged under the threshold over
    the window (the seed's ``avg_over_time(...[5m]) < 10``, per pod)."""
    labels = config.labels
    filters = {"namespace": namespace} if namespace is not None else {"held": True}
    series = selector(config.utilisation_metric, config, **filters)
    average = percent(
        f"avg {_by(labels.namespace, labels.pod)} (avg_over_time({series}[{window_minutes}m]))",
        config,
    )
    return f"{average} < {threshold_percent:g}"


# --- usage (GPU-hours) -----------------------------------------------------------------------


def _period(period_seconds: float, resolution: int) -> str:
    # One second short of the period: a sample exactly at the period's start belongs to the
    # period before (Prometheus 2 ranges include both ends), so adjacent periods never share one.
    return f"[{duration(max(period_seconds - 1, 1))}:{resolution}s]"


def _recorded_selector(
    name: str, config: MetricsConfig, *, namespaces: Sequence[str] | None = None, held=False
) -> str:
    """A recorded per-namespace series, narrowed to some namespaces. ``held`` (the filters'
    other form) narrows nothing: the rules record held GPUs' namespaces only."""
    if namespaces is None:
        return name
    if not namespaces:
        raise ValueError("an empty namespace list matches nothing; do not query")
    return f"{name}{{{config.labels.namespace}=~{quote(regex_alternatives(namespaces))}}}"


def gpu_seconds_held(
    config: MetricsConfig,
    *,
    period_seconds: float,
    resolution: int,
    recorded: bool = False,
    **filters,
):
    """GPU-seconds held per namespace in the period (start, t] ending at the query's time t:
    the number of held GPUs sampled every ``resolution`` seconds, summed, times the
    resolution. With ``recorded``, the counts the recording rules keep per namespace (filters:
    ``namespaces`` or ``held``) stand for counting every GPU's series."""
    if recorded:
        count = _recorded_selector(recorded_gpus_held(config), config, **filters)
    else:
        series = selector(config.utilisation_metric, config, **filters)
        count = f"count {_by(config.labels.namespace)} ({series})"
    return f"sum_over_time(({count}){_period(period_seconds, resolution)}) * {resolution}"


def gpu_seconds_used(
    config: MetricsConfig,
    *,
    period_seconds: float,
    resolution: int,
    recorded: bool = False,
    **filters,
):
    """Utilisation-weighted GPU-seconds per namespace: a GPU at 50% for an hour counts as half
    a GPU-hour. Sampled like ``gpu_seconds_held``, from the recorded sums with ``recorded``."""
    if recorded:
        busy = _recorded_selector(recorded_utilisation_sum(config), config, **filters)
    else:
        series = selector(config.utilisation_metric, config, **filters)
        busy = f"sum {_by(config.labels.namespace)} ({series})"
    scale = resolution if config.utilisation_is_ratio else resolution / 100
    return f"sum_over_time(({busy}){_period(period_seconds, resolution)}) * {scale:g}"


def gpu_seconds_idle(
    config: MetricsConfig,
    *,
    period_seconds: float,
    resolution: int,
    threshold_percent: float,
    **filters,
):
    """GPU-seconds held per namespace while the GPU's utilisation was under the idle threshold
    (the cluster's ``idle_utilization_percent``, as the idle notices use it), sampled like
    ``gpu_seconds_held``: the held GPU-seconds' idle share."""
    series = selector(config.utilisation_metric, config, **filters)
    threshold = threshold_percent / 100 if config.utilisation_is_ratio else threshold_percent
    count = f"count {_by(config.labels.namespace)} ({series} < {threshold:g})"
    return f"sum_over_time(({count}){_period(period_seconds, resolution)}) * {resolution}"
