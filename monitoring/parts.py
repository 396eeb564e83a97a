"""Parts of a monitoring page, fetched concurrently and cached, and the ``Chart`` a part makes.

A page is a list of ``Part``\\ s (a chart, the pods table, the node inventory). Their queries run
concurrently, so a page waits for its slowest query rather than for the sum of them; each result
is turned into what the page shows as soon as it arrives, while the others are still in flight.
What a part made (a chart's compact figure JSON, the pods) is kept in Django's cache for
``MONITORING_CACHE_SECONDS`` under a key naming everything it depends on, so the same page asked
again within that time (by anyone, from any web worker when the cache is shared) runs no query.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.utils.functional import SimpleLazyObject
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from clusters.models import Cluster
from monitoring import figures, promql
from monitoring.metrics import prometheus_for, unavailable_message
from monitoring.prometheus import PrometheusClient, PrometheusError

T = TypeVar("T")

# Part of every cache key: bump it when what a part keeps in the cache changes shape.
# 2: a pod's ``PodUsage`` carries the kinds of GPU it holds (``holdings``).
CACHE_VERSION = 2


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


class Fetching:
    """A page's parts on their way: those in the cache are read at once, the rest are fetched
    from now on, all at once; ``results()`` waits for them and builds each.

    A page starts its parts as soon as it knows what to show, and reads the results only where
    it draws them (see ``later``): its other database reads and the template up to its charts
    happen while Prometheus answers. Failures are never cached: a Prometheus that is back is
    asked again at once.
    """

    def __init__(self, parts: Sequence[Part]) -> None:
        self._seconds = settings.MONITORING_CACHE_SECONDS
        self._results: dict[str, Any] = {}
        if self._seconds > 0:
            found = cache.get_many([part.cache_key for part in parts])
            self._results = {
                part.key: found[part.cache_key] for part in parts if part.cache_key in found
            }
        # Each fetch in a copy of this context: monitoring.prometheus.record_queries sees it.
        self._futures = {
            _pool().submit(contextvars.copy_context().run, part.fetch): part
            for part in parts
            if part.key not in self._results
        }

    def results(self) -> dict[str, Any]:
        """Each part's result by key, built in the calling thread as each fetch ends."""
        futures, self._futures = self._futures, {}
        fresh: dict[str, Any] = {}
        for future in as_completed(futures):
            part = futures[future]
            try:
                fetched = future.result()
            except part.errors as error:
                self._results[part.key] = part.failed(error)
            else:
                self._results[part.key] = fresh[part.cache_key] = part.build(fetched)
        if fresh and self._seconds > 0:
            cache.set_many(fresh, timeout=self._seconds)
        return self._results


def resolve(parts: Sequence[Part]) -> dict[str, Any]:
    """Each part's result by key: from the cache, or fetched (all at once) and built."""
    return Fetching(parts).results()


def later(fetching: Fetching, finish: Callable[[dict[str, Any]], T]) -> T:
    """``finish(fetching.results())``, made the first time anything reads from it (a template
    reaching the page's charts), not now."""
    return SimpleLazyObject(lambda: finish(fetching.results()))


def dashboard_prometheus(cluster: Cluster) -> PrometheusClient:
    """The cluster's client without its own cache: ``resolve`` caches what the parts made,
    from the request's thread (a cache client per worker thread would be a connection each)."""
    return prometheus_for(cluster, cache_seconds=0)


def aligned_span(window: promql.Window, step: int | None = None) -> tuple[float, float]:
    """The window's start and end on its step's grid, the end held for the cache's lifetime so
    that everyone asking within it asks (and caches) the same queries."""
    return window.aligned(step, every=settings.MONITORING_CACHE_SECONDS)
