"""PromQL for DCGM metrics: pure builders, no I/O.

Every aggregation happens in Prometheus (sum/avg/count by namespace, node, pod), so the portal
only ever moves a bounded number of series and points. Which series a query reads, what a
cluster calls them (its ``MetricsConfig``: label layout, utilisation metric, exporter pin,
shared nodes) and how much of a GPU each one is, is ``monitoring.series``; its names are
importable from here too.

GPUs held and GPU-hours count GPU equivalents: a MIG instance as its profile's share of its GPU,
a pod's series on a shared GPU as one replica of it (1/replicas); utilisation-weighted hours
count a shared GPU's series as the pod's own share of the GPU's time (``gpu_share_terms``).
"""

from __future__ import annotations

import datetime
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from monitoring.series import FB_USED as FB_USED
from monitoring.series import GPU_KEY as GPU_KEY
from monitoring.series import GPU_LABEL as GPU_LABEL
from monitoring.series import GPU_UTIL as GPU_UTIL
from monitoring.series import GR_ENGINE_ACTIVE as GR_ENGINE_ACTIVE
from monitoring.series import LAYOUT_EXPORTED as LAYOUT_EXPORTED
from monitoring.series import LAYOUT_NAMESPACE as LAYOUT_NAMESPACE
from monitoring.series import MIG_INSTANCE_LABEL as MIG_INSTANCE_LABEL
from monitoring.series import MIG_PROFILE_LABEL as MIG_PROFILE_LABEL
from monitoring.series import MODEL_LABEL as MODEL_LABEL
from monitoring.series import NODE_LABEL as NODE_LABEL
from monitoring.series import POWER as POWER
from monitoring.series import RATIO_METRICS as RATIO_METRICS
from monitoring.series import TEMPERATURE as TEMPERATURE
from monitoring.series import Labels as Labels
from monitoring.series import MetricsConfig as MetricsConfig
from monitoring.series import _by as _by
from monitoring.series import _exporter_matchers as _exporter_matchers
from monitoring.series import _scaled as _scaled
from monitoring.series import gpu_share_terms as gpu_share_terms
from monitoring.series import held_body as held_body
from monitoring.series import percent as percent
from monitoring.series import quote as quote
from monitoring.series import regex_alternatives as regex_alternatives
from monitoring.series import selector as selector
from monitoring.series import used_body as used_body
from monitoring.series import utilisation_series as utilisation_series
from monitoring.series import utilisation_terms as utilisation_terms

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


# --- utilisation over time -------------------------------------------------------------------


def utilisation(config: MetricsConfig, aggregation: str, by: Sequence[str], **filters) -> str:
    """``aggregation by (by) (utilisation)`` in percent, over the GPUs and MIG instances
    ``filters`` select."""
    inner = utilisation_series(config, **filters)
    return percent(f"{aggregation} {_by(*by)} ({inner})", config)


def utilisation_by_pod(config: MetricsConfig, *, namespace: str) -> str:
    """Average utilisation of each pod's GPUs (or slices, or shares) in one namespace, in
    percent."""
    return utilisation(config, "avg", [config.labels.pod], namespace=namespace, held=True)


def utilisation_by_gpu(config: MetricsConfig, *, namespace: str, pods: Sequence[str]) -> str:
    """Utilisation of each GPU (node and index) or MIG instance of one that the given pods
    hold, in percent; on a shared GPU, their own share of it."""
    return utilisation(config, "max", GPU_KEY, namespace=namespace, pods=pods, held=True)


def utilisation_heatmap(config: MetricsConfig) -> str:
    """Utilisation of every GPU of the cluster, held or not, one series per (node, GPU) and per
    MIG instance of one. A shared GPU is one series: its pods' shares of it summed."""
    return utilisation(config, "sum", GPU_KEY)


# The bands of a large cluster's heatmap, in percent: 0-10 ... 90-100.
UTILISATION_BAND = 10
BAND_LABEL = "band"


def utilisation_bands(config: MetricsConfig) -> str:
    """How many of the cluster's GPUs (and MIG instances, shared GPUs as one) are in each band
    of utilisation, one series per band labelled ``band`` with its lower bound (``0``, ``10``,
    ... ``90``; 100% counts in the last): the heatmap of a cluster too large for a row per GPU.
    The same series as ``utilisation_heatmap``, counted by Prometheus."""
    per_gpu = f"clamp_min({utilisation_heatmap(config)}, 0)"
    band = f"floor({per_gpu} / {UTILISATION_BAND}) * {UTILISATION_BAND}"
    return f'count_values("{BAND_LABEL}", clamp_max({band}, {100 - UTILISATION_BAND}))'


def team_average_utilisation(config: MetricsConfig, *, namespace: str) -> str:
    """Average utilisation over all GPUs (slices, shares) a namespace holds, one series."""
    return percent(f"avg({utilisation_series(config, namespace=namespace)})", config)


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
    """GPU equivalents a namespace's pods hold (a MIG slice as its share of a GPU, a replica of
    a shared GPU as 1/replicas)."""
    return f"sum({gpu_share_terms(config, held_body, namespace=namespace)}) or vector(0)"


def gpus_held_by_namespace(config: MetricsConfig) -> str:
    """GPU equivalents held right now, per namespace."""
    inner = gpu_share_terms(config, held_body, held=True)
    return f"sum {_by(config.labels.namespace)} ({inner})"


def _over(function: str, over: str):
    """A ``gpu_share_terms`` body: ``function`` of each selector over the range ``over``."""

    def body(series: str, scale: float) -> str:
        value = f"{function}({series}{over})"
        return f"({_scaled(value, scale)})" if function != "count_over_time" else value

    return body


def average_utilisation_by_namespace(
    config: MetricsConfig, window: Window, *, recorded: bool = False
) -> str:
    """Each namespace's average utilisation over the window (an instant query at its end),
    weighted by GPU time: every sample of every GPU it held counts once, so a pod that ran for
    ten minutes weighs a tenth of one that ran for a hundred, and a MIG slice by its share of a
    GPU. A shared GPU's series counts its share of the GPU's time over the replica it was
    allotted: the utilisation of what the pod held (over 100% while it used more than its
    replica's share, which time-slicing allows while the others are idle).

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
    used = gpu_share_terms(config, _over("sum_over_time", over), allotted=False, held=True)
    held = gpu_share_terms(config, _over("count_over_time", over), held=True)
    return percent(f"sum {by} ({used}) / sum {by} ({held})", config)


# --- recording rules -------------------------------------------------------------------------

# The series the rules below record carry this name and these labels once they are loaded, so
# that the portal can tell whether they were recording over a window (``recording_rules_cover``).
# Bump the version when a rule's meaning changes: series recorded under the old one are not used.
# 2: GPU equivalents (MIG slices and shared GPUs as their share), MIG instances on GPU_UTIL.
RECORDING_RULES_SERIES = "gpu_portal_recording_rules"
RECORDING_RULES_VERSION = "2"


def _recorded(config: MetricsConfig, operation: str) -> str:
    """A recorded series' name, ``level:metric:operation`` as Prometheus' naming convention
    has it; the level is the namespace label of the cluster's layout."""
    return f"{config.labels.namespace}:{config.utilisation_metric.lower()}:{operation}"


def recorded_utilisation_sum(config: MetricsConfig) -> str:
    """Per namespace, the sum of its GPUs' utilisation (in the metric's own unit), each GPU
    weighed by its share (``gpu_share_terms`` without ``allotted``)."""
    return _recorded(config, "sum")


def recorded_gpus_held(config: MetricsConfig) -> str:
    """Per namespace, how many GPU equivalents its pods hold."""
    return _recorded(config, "count")


def recording_rules_labels(config: MetricsConfig) -> dict[str, str]:
    """What the recorded series were made from: the layout, the metric, the exporter pin (sums
    over unpinned series could count a tenant's forged ones), the shared nodes (their replicas
    weigh the sums; rules loaded before the nodes changed no longer count them right) and the
    rules' version."""
    shared = ";".join(f"{r}:{','.join(nodes)}" for r, nodes in config.shared_nodes)
    return {
        "layout": config.layout,
        "utilisation_metric": config.utilisation_metric,
        "exporter": ",".join(_exporter_matchers(config)),
        "shared_nodes": hashlib.sha256(shared.encode()).hexdigest()[:16] if shared else "",
        "version": RECORDING_RULES_VERSION,
    }


def recording_rules(config: MetricsConfig) -> list[dict]:
    """Prometheus recording rules (``record``/``expr`` dicts) for the cluster's layout and
    metric: per namespace, the utilisation summed over its GPUs and the GPUs counted (as GPU
    equivalents), at each evaluation; and a constant series saying the rules were loaded."""
    used = gpu_share_terms(config, used_body, allotted=False, held=True)
    held = gpu_share_terms(config, held_body, held=True)
    by = _by(config.labels.namespace)
    return [
        {"record": recorded_utilisation_sum(config), "expr": f"sum {by} ({used})"},
        {"record": recorded_gpus_held(config), "expr": f"sum {by} ({held})"},
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


def _pod_filters(namespace: str | None) -> dict:
    return {"namespace": namespace} if namespace is not None else {"held": True}


def _pod_average(config: MetricsConfig, window: str, namespace: str | None) -> str:
    """Per pod, the average utilisation of its GPUs, MIG instances or shares over the window,
    in percent: a pod holding a slice is judged by that slice, a pod sharing a GPU by its own
    share of the GPU's time."""
    labels = config.labels
    series = utilisation_terms(
        config, _over("avg_over_time", f"[{window}]"), **_pod_filters(namespace)
    )
    return percent(f"avg {_by(labels.namespace, labels.pod)} ({series})", config)


def pod_average_utilisation(
    config: MetricsConfig, *, window_minutes: int, namespace: str | None = None
) -> str:
    """Per pod holding GPUs now, the average utilisation of its GPUs over the idle window, in
    percent; only pods that already held them a whole window ago, so a pod is never judged on
    its first minutes. Labels: namespace, pod (in the cluster's layout)."""
    labels = config.labels
    filters = _pod_filters(namespace)
    window = f"{window_minutes}m"
    on = f"on ({labels.namespace}, {labels.pod})"
    now = utilisation_series(config, **filters)
    before = utilisation_terms(config, lambda s, _: f"{s} offset {window}", **filters)
    return f"({_pod_average(config, window, namespace)}) and {on} {now} and {on} {before}"


def pod_gpu_count(config: MetricsConfig, *, namespace: str | None = None) -> str:
    """GPUs (MIG instances, shares of a GPU) each pod holds now, each counted once. Labels:
    namespace, pod."""
    labels = config.labels
    series = utilisation_series(config, **_pod_filters(namespace))
    return f"count {_by(labels.namespace, labels.pod)} ({series})"


# What tells a pod's GPUs apart: the node (a shared node's GPUs are replicas), the model and the
# MIG profile (a slice's share of its GPU).
POD_GPU_KIND_LABELS = (NODE_LABEL, MODEL_LABEL, MIG_PROFILE_LABEL)


def pod_gpu_kinds(config: MetricsConfig, *, namespace: str | None = None) -> str:
    """``pod_gpu_count`` split by what each series is (``POD_GPU_KIND_LABELS``): what
    ``monitoring.pod_gpus`` weighs and describes. Labels: namespace, pod, node, model,
    MIG profile."""
    labels = config.labels
    series = utilisation_series(config, **_pod_filters(namespace))
    return f"count {_by(labels.namespace, labels.pod, *POD_GPU_KIND_LABELS)} ({series})"


def idle_rule_expression(
    config: MetricsConfig, *, threshold_percent: float, window_minutes: int, namespace=None
) -> str:
    """The LowGPUUsage alert's expression: pods whose GPUs averaged under the threshold over
    the window (the seed's ``avg_over_time(...[5m]) < 10``, per pod)."""
    return f"{_pod_average(config, f'{window_minutes}m', namespace)} < {threshold_percent:g}"


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
    the GPU equivalents held (``gpu_share_terms``), sampled every ``resolution`` seconds,
    summed, times the resolution. With ``recorded``, the sums the recording rules keep per
    namespace (filters: ``namespaces`` or ``held``) stand for every GPU's series."""
    if recorded:
        count = _recorded_selector(recorded_gpus_held(config), config, **filters)
    else:
        shares = gpu_share_terms(config, held_body, **filters)
        count = f"sum {_by(config.labels.namespace)} ({shares})"
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
    a GPU-hour, a 3g.40gb slice at 50% as 3/14, a pod whose share of a shared GPU's time was
    25% as a quarter. Sampled like ``gpu_seconds_held``, from the recorded sums with
    ``recorded``."""
    if recorded:
        busy = _recorded_selector(recorded_utilisation_sum(config), config, **filters)
    else:
        shares = gpu_share_terms(config, used_body, allotted=False, **filters)
        busy = f"sum {_by(config.labels.namespace)} ({shares})"
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
    """GPU-seconds held per namespace while the GPU's (slice's, pod's share's) utilisation was
    under the idle threshold (the cluster's ``idle_utilization_percent``, as the idle notices
    use it), sampled like ``gpu_seconds_held``: the held GPU-seconds' idle share."""
    threshold = threshold_percent / 100 if config.utilisation_is_ratio else threshold_percent

    def idle(series: str, scale: float) -> str:
        return f"(({series} < {threshold / scale:g}) * 0 + 1)"

    shares = gpu_share_terms(config, idle, **filters)
    count = f"sum {_by(config.labels.namespace)} ({shares})"
    return f"sum_over_time(({count}){_period(period_seconds, resolution)}) * {resolution}"
