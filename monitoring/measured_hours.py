"""GPU-hours held and used per namespace in a report's period, as Prometheus measured them,
and the part of them the portal keeps.

A period's hours are a sum of samples: ``promql.gpu_seconds_held`` and its twins sample the
GPUs every ``MONITORING_USAGE_RESOLUTION_SECONDS`` on a grid fixed in time, so the hours of
(start, b] and of (b, t] add up to those of (start, t] for any b on that grid. What lies more
than ``SETTLED_AFTER`` in the past no scrape or rule evaluation changes any more. That settled
part of a period is kept in Django's cache per period (for ``MONITORING_USAGE_CACHE_SECONDS``)
and grown an hour at a time: a report asks Prometheus only for what came after it. An admin's
month so far costs queries over its last hour or so, however late in the month, rather than
over the whole month on every view; a period that ended costs none once measured. History
written into Prometheus afterwards, by a ``promtool`` backfill of a period already measured,
shows once the kept hours are forgotten (``forget_kept_hours``, which ``manage.py
forget_usage_hours`` runs) or expire.

Each piece reads the portal's recording rules' per-namespace series where the rules were
recording over it (a handful of series, however many GPUs), every GPU's series otherwise. The
hours held under an idle threshold (a cluster setting) have no recorded series: they always
read the GPUs' own.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache

from monitoring import promql
from monitoring.metrics import recording_rules_cover
from monitoring.prometheus import PrometheusClient

# Older than this, a sample is final: past Prometheus' 5-minute lookback and any scrape or rule
# evaluation still under way.
SETTLED_AFTER = 600
# The settled part grows by whole hours: one extension an hour per period, not one a request.
SETTLED_STEP = 3600
# Part of every cache key: bump it when what is kept changes shape or meaning.
CACHE_VERSION = 1

Hours = tuple[dict[str, float], ...]  # held, used (and idle) GPU-hours per namespace


def measured_hours(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    *,
    start: float,
    end: float,
    now: float,
    namespaces: list[str] | None,
    idle_threshold_percent: float | None = None,
) -> Hours:
    """GPU-hours held and used per namespace from ``start`` (excluded) to ``end`` (unix
    seconds), and with an idle threshold also those held while under it; every namespace's
    when ``namespaces`` is None. The part settled by ``now`` comes from the cache where it was
    measured before; what is measured of it is kept."""
    resolution = settings.MONITORING_USAGE_RESOLUTION_SECONDS
    measure = functools.partial(
        _measure,
        prometheus,
        config,
        resolution=resolution,
        namespaces=namespaces,
        idle_threshold_percent=idle_threshold_percent,
    )
    keep_seconds = settings.MONITORING_USAGE_CACHE_SECONDS
    growing_to = _on_grid(now - SETTLED_AFTER, SETTLED_STEP, resolution)
    ends_at = _on_grid(end, resolution)
    settled = min(ends_at, growing_to)
    if keep_seconds <= 0 or settled <= start:
        return measure(start, end)
    generation = _generation(prometheus.identity)
    key = functools.partial(
        _cache_key,
        prometheus,
        config,
        resolution,
        namespaces,
        idle_threshold_percent,
        start,
        generation=generation,
    )
    # A period settled to its end is kept under its end; one still growing under its start
    # only (its end is "now"), which the period, once settled, starts from.
    keys = [key(ends_at), key(None)] if ends_at <= growing_to else [key(None)]
    found = cache.get_many(keys)
    measured_to, hours = start, _empty(idle_threshold_percent)
    for candidate in keys:
        kept = found.get(candidate)
        if kept is not None and start < kept[0] <= settled:
            measured_to, hours = kept
            break
    if measured_to < settled:
        hours = _add(hours, measure(measured_to, settled))
        cache.set(keys[0], (settled, hours), timeout=keep_seconds)
    if settled < end:
        hours = _add(hours, measure(settled, end))
    return hours


def _measure(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    start: float,
    end: float,
    *,
    resolution: int,
    namespaces: list[str] | None,
    idle_threshold_percent: float | None,
) -> Hours:
    """The hours of (start, end], queried at ``end``: from the recorded series where the rules
    cover the span."""
    recorded = recording_rules_cover(prometheus, config, start=start, end=end)
    filters = {"namespaces": namespaces} if namespaces is not None else {"held": True}
    span = {"period_seconds": end - start, "resolution": resolution, **filters}
    queries = [
        promql.gpu_seconds_held(config, recorded=recorded, **span),
        promql.gpu_seconds_used(config, recorded=recorded, **span),
    ]
    if idle_threshold_percent is not None:
        queries.append(
            promql.gpu_seconds_idle(config, threshold_percent=idle_threshold_percent, **span)
        )
    namespace = config.labels.namespace
    return tuple(
        {
            s.labels.get(namespace, ""): s.value / 3600
            for s in prometheus.query(query, at=end)
            if not math.isnan(s.value)
        }
        for query in queries
    )


def _empty(idle_threshold_percent: float | None) -> Hours:
    return ({}, {}, {}) if idle_threshold_percent is not None else ({}, {})


def _add(kept: Hours, more: Hours) -> Hours:
    totals = []
    for before, after in zip(kept, more, strict=True):
        total = dict(before)
        for namespace, hours in after.items():
            total[namespace] = total.get(namespace, 0.0) + hours
        totals.append(total)
    return tuple(totals)


def _on_grid(moment: float, *steps: int) -> int:
    """``moment`` rounded down to a multiple of each step in turn (whole seconds)."""
    result = math.floor(moment)
    for step in steps:
        result -= result % step
    return result


def forget_kept_hours(prometheus: PrometheusClient) -> None:
    """Measure every period of this Prometheus afresh from now on: after history was written
    into periods already measured (a ``promtool`` backfill). What was kept is no longer read,
    and expires in its time."""
    _generation(prometheus.identity)
    cache.incr(_generation_key(prometheus.identity))


def _generation(identity: str) -> int:
    """A Prometheus' generation: part of its hours' keys, bumped to forget them. It starts at
    the time it was first needed, so that one lost from the cache never brings back the
    hours of an earlier one."""
    key = _generation_key(identity)
    generation = cache.get(key)
    if generation is None:
        cache.add(key, time.time_ns(), timeout=None)
        generation = cache.get(key)
    return generation


def _generation_key(identity: str) -> str:
    return f"monitoring:usage-hours-generation:{identity}"


def _cache_key(
    prometheus: PrometheusClient,
    config: promql.MetricsConfig,
    resolution: int,
    namespaces: list[str] | None,
    idle_threshold_percent: float | None,
    start: float,
    end: int | None,
    *,
    generation: int,
) -> str:
    """Everything the hours depend on: which Prometheus and its generation, the layout and
    metric, the sampling, the namespaces, the idle threshold, where the period starts and
    where it ends (None while it grows)."""
    depends_on = (
        CACHE_VERSION,
        prometheus.identity,
        generation,
        config,
        resolution,
        None if namespaces is None else sorted(namespaces),
        idle_threshold_percent,
        start,
        end,
    )
    digest = hashlib.sha256(repr(depends_on).encode()).hexdigest()
    return f"monitoring:usage-hours:{digest}"
