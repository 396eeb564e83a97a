"""The DCGM series a query reads, and how much of a GPU each one is: pure builders, no I/O.

``monitoring.promql`` builds every query from these. What varies per cluster is its
``MetricsConfig``:

* the label layout: DCGM exporter's own ``namespace``/``pod``/``container`` labels, or
  ``exported_namespace``/``exported_pod``/``exported_container`` when Prometheus scrapes the
  exporter without ``honor_labels`` and renames them;
* the utilisation metric: ``DCGM_FI_DEV_GPU_UTIL`` in percent, or
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, a 0-1 ratio scaled to percent;
* the exporter pin (``MetricsConfig.exporter``, label matchers such as
  ``job="dcgm-exporter"``): Prometheus may scrape other sources that publish the same metric
  names, a tenant's pod among them, with any namespace and pod labels it likes; only the
  exporter's series may count for charts, idle detection and usage;
* the nodes whose GPUs are shared (time-slicing or MPS) and into how many replicas each.

A series is a whole GPU, a MIG instance (it carries ``GPU_I_PROFILE`` and ``GPU_I_ID``) or one
pod's share of a shared GPU (whole-GPU labels on a shared node, one series per pod using it).
DCGM publishes no ``DCGM_FI_DEV_GPU_UTIL`` for a MIG instance, only
``DCGM_FI_PROF_GR_ENGINE_ACTIVE``: on a cluster whose metric is GPU_UTIL, utilisation reads the
instances' engine activity (times 100) beside the GPUs' own (``utilisation_terms``), so a slice
is never missing from a chart, an idle check or a report.

Label values that come from the portal (a team's slug, a pod name) are escaped here; nothing a
request sends is ever pasted into a query unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from core.validators import LabelMatcher
from monitoring import gpu_shares

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
# A MIG instance's labels: its profile ("1g.10gb") and its instance id on the GPU.
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
MIG_INSTANCE_LABEL = "GPU_I_ID"
# One row of a per-GPU chart: a GPU, or a MIG instance of it.
GPU_KEY = (NODE_LABEL, GPU_LABEL, MIG_PROFILE_LABEL, MIG_INSTANCE_LABEL)

LAYOUT_NAMESPACE = "namespace"
LAYOUT_EXPORTED = "exported"


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
    # (replicas, node names) for the nodes whose GPUs are shared, fewest replicas first.
    shared_nodes: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        Labels.for_layout(self.layout)  # refuse an unknown layout early
        if self.utilisation_metric not in (GPU_UTIL, GR_ENGINE_ACTIVE):
            raise ValueError(f"unknown utilisation metric {self.utilisation_metric!r}")
        if any(replicas < 1 or not nodes for replicas, nodes in self.shared_nodes):
            raise ValueError("shared nodes need at least one replica and one node")

    @classmethod
    def shared(cls, replicas_by_node: dict[str, int]) -> tuple[tuple[int, tuple[str, ...]], ...]:
        """``shared_nodes`` from {node: replicas} (the capacity sync's record of the nodes)."""
        by_replicas: dict[int, list[str]] = {}
        for node, replicas in replicas_by_node.items():
            if int(replicas) > 1:
                by_replicas.setdefault(int(replicas), []).append(node)
        return tuple((r, tuple(sorted(nodes))) for r, nodes in sorted(by_replicas.items()))

    @property
    def labels(self) -> Labels:
        return Labels.for_layout(self.layout)

    @property
    def utilisation_is_ratio(self) -> bool:
        return self.utilisation_metric in RATIO_METRICS


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
    matchers: Sequence[str] = (),
) -> str:
    """``metric{...}`` of the cluster's DCGM exporter, narrowed to a namespace (or several), some
    pods, or every GPU a pod holds.

    ``held`` keeps only GPUs attributed to a pod (the namespace label is set); it is implied by
    any namespace filter. ``matchers`` are added as they are (the builders' own, never a
    request's).
    """
    labels = config.labels
    extra, matchers = matchers, _exporter_matchers(config)
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
    matchers.extend(extra)
    return f"{metric}{{{','.join(matchers)}}}"


def _exporter_matchers(config: MetricsConfig) -> list[str]:
    return [f"{m.label}{m.operator}{quote(m.value)}" for m in config.exporter]


def percent(expression: str, config: MetricsConfig) -> str:
    """Utilisation in percent: a ratio metric's expression times 100, a percent one as is."""
    return f"({expression}) * 100" if config.utilisation_is_ratio else expression


def _by(*labels: str) -> str:
    return f"by ({', '.join(labels)})"


# --- utilisation and GPU shares per series -----------------------------------------------------

# What a term of ``utilisation_terms`` turns its selector into: ``body(selector, scale)``, where
# ``scale`` (1 or 100) brings the selector's unit to the config's metric's.
Body = Callable[[str, float], str]


def _scaled(expression: str, scale: float) -> str:
    return expression if scale == 1 else f"({expression}) * {scale:g}"


def _sources(config: MetricsConfig) -> list[tuple[str, tuple[str, ...], float]]:
    """(metric, matchers, scale to the config's unit) of the series utilisation reads: the
    config's metric, and on a GPU_UTIL cluster also the MIG instances' engine activity."""
    if config.utilisation_is_ratio:
        return [(config.utilisation_metric, (), 1)]
    return [(GPU_UTIL, (), 1), (GR_ENGINE_ACTIVE, (f'{MIG_PROFILE_LABEL}!=""',), 100)]


def utilisation_terms(config: MetricsConfig, body: Body | None = None, **filters) -> str:
    """Every GPU's and MIG instance's utilisation series the filters select (``selector``'s),
    in the config's metric's unit, each passed through ``body`` (default: as it is). The
    instances' GR_ENGINE_ACTIVE joins a GPU_UTIL cluster's series with ``or``: a range
    function or ``offset`` must go inside ``body``, on each selector."""
    body = body or _scaled
    terms = [
        body(selector(metric, config, matchers=matchers, **filters), scale)
        for metric, matchers, scale in _sources(config)
    ]
    return terms[0] if len(terms) == 1 else "(" + " or ".join(terms) + ")"


def utilisation_series(config: MetricsConfig, **filters) -> str:
    """``utilisation_terms`` as they are: one series per GPU, MIG instance or pod's share."""
    return utilisation_terms(config, **filters)


# The constant vector a MIG series' compute slices are read from: its profile's leading digits
# copied into this label, joined with a sample per slice count whose value is that count.
MIG_SLICES_LABEL = "mig_slices"
MIG_SLICES_PATTERN = quote(gpu_shares.MIG_PROFILE_SLICES.pattern.lstrip("^") + ".*")
_SLICE_COUNTS = " or ".join(
    f'label_replace(vector({n}), "{MIG_SLICES_LABEL}", "{n}", "", "")'
    for n in range(1, gpu_shares.MIG_SLICES + 1)
)


def _mig_model_matchers() -> list[tuple[str, int]]:
    """(modelName matcher, slices per GPU) per row of the MIG table, the default last (the
    models that match no row)."""
    classes = gpu_shares.mig_model_classes()
    named = [name for name, _ in classes if name is not None]
    result = [
        (f"{MODEL_LABEL}=~{quote(f'(?i).*{regex_alternatives([name])}.*')}", slices)
        for name, slices in classes
        if name is not None
    ]
    default = next(slices for name, slices in classes if name is None)
    rest = f"{MODEL_LABEL}!~{quote(f'(?i).*({regex_alternatives(named)}).*')}" if named else ""
    return [*result, (rest, default)]


def gpu_share_terms(config: MetricsConfig, body: Body, *, allotted: bool = True, **filters) -> str:
    """Every GPU's, MIG instance's and shared GPU's series the filters select, each made a
    value by ``body`` (a count, a sum over time, an idle test, in the config's metric's unit)
    and weighed by the share of a GPU it is: 1 for a whole GPU, a MIG instance's profile slices
    over its GPU's (``gpu_shares``, per model), a shared GPU's series 1/replicas of its node.

    Without ``allotted`` a shared GPU's series weighs 1: its utilisation is already the pod's
    share of the whole GPU's time (what it used), not of its replica (what it was allotted)."""
    if config.utilisation_is_ratio:
        whole_metric, mig_metric, mig_scale = config.utilisation_metric, GR_ENGINE_ACTIVE, 1
    else:
        whole_metric, mig_metric, mig_scale = GPU_UTIL, GR_ENGINE_ACTIVE, 100

    def term(metric: str, scale: float, *matchers: str) -> str:
        return body(selector(metric, config, matchers=matchers, **filters), scale)

    not_mig = f'{MIG_PROFILE_LABEL}=""'
    every_shared = [node for _, nodes in config.shared_nodes for node in nodes]
    whole = [not_mig]
    if every_shared:
        whole.append(f"{NODE_LABEL}!~{quote(regex_alternatives(every_shared))}")
    terms = [term(whole_metric, 1, *whole)]
    for replicas, nodes in config.shared_nodes:
        share = term(whole_metric, 1, not_mig, f"{NODE_LABEL}=~{quote(regex_alternatives(nodes))}")
        terms.append(f"{share} / {replicas}" if allotted else share)
    # Each MIG class's instances over its GPU's slices, then times the profile's slices (one
    # join for every class: the division commutes).
    per_class = []
    for model, slices in _mig_model_matchers():
        matchers = [f'{MIG_PROFILE_LABEL}!=""', *([model] if model else [])]
        per_class.append(
            f"label_replace({term(mig_metric, mig_scale, *matchers)}, "
            f'"{MIG_SLICES_LABEL}", "$1", "{MIG_PROFILE_LABEL}", {MIG_SLICES_PATTERN}) / {slices}'
        )
    terms.append(
        f"({' or '.join(per_class)}) * on ({MIG_SLICES_LABEL}) group_left () ({_SLICE_COUNTS})"
    )
    return "(" + " or ".join(terms) + ")"


def held_body(series: str, scale: float) -> str:
    """A series as 1 while it exists: what ``gpu_share_terms`` weighs into GPUs held."""
    return f"({series} * 0 + 1)"


def used_body(series: str, scale: float) -> str:
    """A series' utilisation in the config's metric's unit: weighed into GPUs used."""
    return f"({_scaled(series, scale)})"
