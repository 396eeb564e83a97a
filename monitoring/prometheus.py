"""A thin client for Prometheus' HTTP API: the only place the portal talks to Prometheus.

Instant and range queries over ``httpx`` with a bounded timeout, results cached briefly in
Django's cache, and three clear failures that pages and the API turn into a message or a 503:
``PrometheusUnreachable``, ``PrometheusTimeout`` and ``PrometheusQueryError``.

One client serves one page or request, and may be used from several threads at once (a page
runs its queries concurrently). Once Prometheus was unreachable or too slow, later queries on the
same client fail at once with the same error: a page with five charts waits for one timeout, not
five. The HTTP connections underneath are pooled per process and Prometheus URL, so a page does
not pay for a new connection (and TLS context) per query.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import orjson
from django.conf import settings
from django.core.cache import cache

from core.redaction import without_credentials

logger = logging.getLogger(__name__)


class PrometheusError(Exception):
    """Prometheus could not answer. ``reason`` is a short code for APIs, ``str()`` a sentence
    for people."""

    reason = "error"


class PrometheusNotConfigured(PrometheusError):
    reason = "not_configured"


class PrometheusUnreachable(PrometheusError):
    reason = "unreachable"


class PrometheusTimeout(PrometheusError):
    reason = "timeout"


class PrometheusQueryError(PrometheusError):
    reason = "query_error"


@dataclass(frozen=True)
class Sample:
    """One series of an instant query: its labels and its value at the query's time."""

    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels, timestamps (unix seconds) and values."""

    labels: dict[str, str]
    timestamps: list[float]
    values: list[float]


@dataclass
class QueryRecord:
    """A query a client sent (or answered from its cache), for benchmarks and tests."""

    path: str
    params: dict[str, str]
    seconds: float
    cached: bool


# The lists collecting queries in this context: a context variable, so that work a page hands
# to other threads (in a copy of its context, see ``monitoring.parts.resolve``) is
# recorded too.
_recorders: contextvars.ContextVar[tuple[list[QueryRecord], ...]] = contextvars.ContextVar(
    "prometheus_query_recorders", default=()
)


@contextmanager
def record_queries() -> Iterator[list[QueryRecord]]:
    """Collect every query the clients run inside the block, in this thread or in threads
    started with a copy of its context."""
    records: list[QueryRecord] = []
    token = _recorders.set((*_recorders.get(), records))
    try:
        yield records
    finally:
        _recorders.reset(token)


def _record(record: QueryRecord) -> None:
    for records in _recorders.get():
        records.append(record)


# One pool of HTTP connections per process, Prometheus URL, credentials and timeout (httpx
# clients are safe to share between threads). Keyed by process id too: a pool made before a
# fork is not reused by the children, which would share its sockets.
_pools: dict[tuple, httpx.Client] = {}
_pools_lock = threading.Lock()


def _pooled_client(base_url: str, auth: tuple[str, str] | None, timeout: float) -> httpx.Client:
    key = (os.getpid(), base_url, auth, timeout)
    with _pools_lock:
        http = _pools.get(key)
        if http is None:
            http = _pools[key] = httpx.Client(
                base_url=base_url,
                timeout=httpx.Timeout(timeout, connect=min(timeout, 3.0)),
                headers={"Accept": "application/json"},
                auth=auth,
                limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
            )
        return http


# Prometheus sends "NaN", "+Inf" too; float() reads them.
_value = float


class PrometheusClient:
    """Queries one Prometheus. ``timeout`` bounds each HTTP call (seconds); answers are kept
    in Django's cache for ``cache_seconds`` (0 disables it)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float | None = None,
        cache_seconds: float | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url:
            raise PrometheusNotConfigured("No Prometheus URL is set for this cluster.")
        # Credentials in the URL (http://user:password@host/) go with each request as HTTP basic
        # auth and nowhere else: not into messages, nor into httpx's log of the URLs it asks.
        url, self._auth = without_credentials(base_url.rstrip("/"))
        self.base_url = url
        self.timeout = settings.MONITORING_PROMETHEUS_TIMEOUT if timeout is None else timeout
        self.cache_seconds = (
            settings.MONITORING_CACHE_SECONDS if cache_seconds is None else cache_seconds
        )
        self._transport = transport
        self._http: httpx.Client | None = None
        self._broken: PrometheusError | None = None

    def close(self) -> None:
        """Close a client of the given ``transport``; pooled connections stay for the next."""
        if self._http is not None and self._transport is not None:
            self._http.close()
        self._http = None

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- queries -----------------------------------------------------------------------------

    def query(self, promql: str, *, at: float | None = None) -> list[Sample]:
        """An instant query (``at``: unix seconds, default now): one sample per series."""
        params = {"query": promql}
        if at is not None:
            params["time"] = _timestamp(at)
        data = self._get("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [Sample(labels={}, value=_value(data["result"][1]))]
        if data["resultType"] != "vector":
            raise PrometheusQueryError(f"Expected a vector, Prometheus sent {data['resultType']}.")
        return [
            Sample(labels=item["metric"], value=_value(item["value"][1])) for item in data["result"]
        ]

    def query_range(self, promql: str, *, start: float, end: float, step: int) -> list[Series]:
        """A range query from ``start`` to ``end`` (unix seconds) every ``step`` seconds."""
        params = {
            "query": promql,
            "start": _timestamp(start),
            "end": _timestamp(end),
            "step": f"{step}s",
        }
        data = self._get("/api/v1/query_range", params)
        if data["resultType"] != "matrix":
            raise PrometheusQueryError(f"Expected a matrix, Prometheus sent {data['resultType']}.")
        series = []
        for item in data["result"]:
            # Timestamps come as JSON numbers (whole seconds as ints, which compare and hash
            # as the same floats), values as strings.
            timestamps, values = zip(*item["values"], strict=True) if item["values"] else ((), ())
            series.append(
                Series(
                    labels=item["metric"],
                    timestamps=list(timestamps),
                    values=list(map(_value, values)),
                )
            )
        return series

    # --- transport ---------------------------------------------------------------------------

    def _client(self) -> httpx.Client:
        if self._http is None:
            if self._transport is None:
                self._http = _pooled_client(self.base_url, self._auth, self.timeout)
            else:
                self._http = httpx.Client(
                    base_url=self.base_url,
                    timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 3.0)),
                    transport=self._transport,
                    headers={"Accept": "application/json"},
                    auth=self._auth,
                )
        return self._http

    @property
    def identity(self) -> str:
        """Which Prometheus answers, and as whom: for cache keys (a digest, so that no
        credential is kept in one)."""
        return hashlib.sha256(json.dumps([self.base_url, self._auth]).encode()).hexdigest()

    def _cache_key(self, path: str, params: dict[str, str]) -> str:
        digest = hashlib.sha256(
            json.dumps([self.base_url, self._auth, path, params], sort_keys=True).encode()
        ).hexdigest()
        return f"monitoring:prometheus:{digest}"

    def _get(self, path: str, params: dict[str, str]) -> dict:
        """GET an API path and return its ``data``; raise a PrometheusError subclass otherwise."""
        if self._broken is not None:
            raise self._broken
        started = time.perf_counter()
        key = self._cache_key(path, params)
        if self.cache_seconds > 0:
            cached = cache.get(key)
            if cached is not None:
                _record(QueryRecord(path, params, time.perf_counter() - started, cached=True))
                return cached
        # Ask Prometheus to give up a little before we do, so it stops working on our behalf.
        # (Prometheus 2.x reads whole units only: milliseconds.)
        params_sent = {**params, "timeout": f"{int(max(self.timeout - 0.5, 0.5) * 1000)}ms"}
        try:
            response = self._send(path, params_sent)
        except httpx.TimeoutException as error:
            self._broken = PrometheusTimeout(
                f"Prometheus at {self.base_url} did not answer within {self.timeout:g} s."
            )
            raise self._broken from error
        except httpx.TransportError as error:
            self._broken = PrometheusUnreachable(
                f"Prometheus at {self.base_url} cannot be reached ({type(error).__name__})."
            )
            raise self._broken from error
        data = self._parse(response, params["query"])
        seconds = time.perf_counter() - started
        _record(QueryRecord(path, params, seconds, cached=False))
        if self.cache_seconds > 0:
            cache.set(key, data, self.cache_seconds)
        return data

    def _send(self, path: str, params: dict[str, str]) -> httpx.Response:
        try:
            return self._client().get(path, params=params)
        except (httpx.RemoteProtocolError, httpx.ReadError):
            # A pooled connection the server closed or reset while idle (it restarted): ask once
            # more, on a new one.
            return self._client().get(path, params=params)

    def _parse(self, response: httpx.Response, promql: str) -> dict:
        try:
            body = orjson.loads(response.content)
        except ValueError:  # orjson.JSONDecodeError is one
            body = None
        if not isinstance(body, dict):
            raise PrometheusQueryError(
                f"Prometheus at {self.base_url} answered HTTP {response.status_code} "
                "without a JSON body."
            )
        if body.get("status") != "success":
            error_type = body.get("errorType", "error")
            message = body.get("error", "no reason given")
            logger.warning("Prometheus refused %r: %s: %s", promql, error_type, message)
            if error_type == "timeout":
                raise PrometheusTimeout(f"Prometheus gave up on a query: {message}")
            raise PrometheusQueryError(f"Prometheus refused a query ({error_type}): {message}")
        return body["data"]


def _timestamp(value: float) -> str:
    return f"{value:.3f}"
