"""The Prometheus client's answers and failures, from real Prometheus servers: the devcluster's
(read only) for what any query yields, and Prometheus servers of the test's own for what one
must be made to do: refuse connections until it starts, stop answering (a stopped process), and
count the requests it served (its own metrics).

What a real Prometheus cannot be made to do on cue stays in
tests/unit/monitoring/test_prometheus_client.py: give up on a query by itself (it checks its
``--query.timeout`` between evaluation steps, and no query was reliably slow enough: with a 1 ms
timeout a heavy range query still passed one time in four), an HTML error page from a gateway in
front of it, and the request parameters the client sends."""

import math
import time

import pytest
from django.core.cache import cache

from monitoring.prometheus import (
    PrometheusClient,
    PrometheusQueryError,
    PrometheusTimeout,
    PrometheusUnreachable,
    record_queries,
)

QUERY = "/api/v1/query"
# Two series that become one labelset: an execution error (422) whatever the data.
SAME_LABELSET = (
    'label_replace(vector(1) or label_replace(vector(2), "a", "b", "", ""), "a", "", "", "")'
)


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def devcluster_prometheus(devcluster):
    with PrometheusClient(devcluster.prometheus_url, timeout=10, cache_seconds=0) as prometheus:
        yield prometheus


def test_an_instant_query_returns_labels_and_values(devcluster_prometheus):
    (sample,) = devcluster_prometheus.query('label_replace(vector(73), "pod", "p", "", "")')

    assert (sample.labels, sample.value) == ({"pod": "p"}, 73)
    (scalar,) = devcluster_prometheus.query("scalar(vector(5))")
    assert (scalar.labels, scalar.value) == ({}, 5)


def test_a_range_query_returns_points_and_reads_nan(devcluster_prometheus):
    end = time.time()
    one = 'label_replace(vector(1), "s", "one", "", "")'
    nan = 'label_replace(vector(0) / 0, "s", "nan", "", "")'
    promql = f"{one} or {nan}"

    series = devcluster_prometheus.query_range(promql, start=end - 60, end=end, step=15)

    by_name = {s.labels["s"]: s for s in series}
    assert set(by_name) == {"one", "nan"}
    for line in by_name.values():
        assert len(line.timestamps) == 5
        steps = zip(line.timestamps, line.timestamps[1:], strict=False)
        assert [b - a for a, b in steps] == pytest.approx([15] * 4)
    assert by_name["one"].values == [1] * 5
    assert all(math.isnan(v) for v in by_name["nan"].values)


def test_a_query_prometheus_cannot_parse_is_a_query_error_with_its_reason(devcluster_prometheus):
    with pytest.raises(PrometheusQueryError, match=r"bad_data.*parse error"):
        devcluster_prometheus.query("up{")


def test_a_url_that_is_not_prometheus_api_is_a_query_error(start_prometheus):
    prometheus = start_prometheus()

    with pytest.raises(PrometheusQueryError, match="answered HTTP 404 without a JSON body"):
        PrometheusClient(f"{prometheus.url}/not-prometheus", cache_seconds=0).query("up")


def test_a_prometheus_that_is_not_started_is_unreachable_and_not_asked_again(start_prometheus):
    prometheus = start_prometheus(running=False)
    client = PrometheusClient(prometheus.url, timeout=5, cache_seconds=0)

    with pytest.raises(PrometheusUnreachable, match="cannot be reached"):
        client.query("vector(1)")
    prometheus.start()

    with pytest.raises(PrometheusUnreachable):
        client.query("vector(1)")  # the same client does not ask again ...
    assert prometheus.requests_served(QUERY, 200) == 0
    fresh = PrometheusClient(prometheus.url, timeout=5, cache_seconds=0)
    assert fresh.query("vector(1)")[0].value == 1  # ... while it answers others


def test_a_prometheus_that_does_not_answer_is_a_timeout_and_not_waited_for_again(
    start_prometheus,
):
    prometheus = start_prometheus()
    client = PrometheusClient(prometheus.url, timeout=1, cache_seconds=0)
    prometheus.pause()

    with pytest.raises(PrometheusTimeout, match="did not answer within 1 s"):
        client.query("vector(1)")
    started = time.monotonic()
    with pytest.raises(PrometheusTimeout):
        client.query("vector(2)")

    assert time.monotonic() - started < 0.5


def test_answers_are_cached_briefly_and_recorded(start_prometheus):
    prometheus = start_prometheus()
    client = PrometheusClient(prometheus.url, timeout=5, cache_seconds=30)
    now = time.time()

    with record_queries() as records:
        client.query("vector(1)", at=now - 100)
        client.query("vector(1)", at=now - 100)
        client.query("vector(1)", at=now - 200)

    assert prometheus.requests_served(QUERY, 200) == 2
    assert [r.cached for r in records] == [False, True, False]
    assert records[0].params == {"query": "vector(1)", "time": f"{now - 100:.3f}"}


def test_an_execution_error_is_a_query_error_and_never_cached(start_prometheus):
    prometheus = start_prometheus()
    client = PrometheusClient(prometheus.url, timeout=5, cache_seconds=30)

    for _ in range(2):
        with pytest.raises(PrometheusQueryError, match=r"execution.*same labelset"):
            client.query(SAME_LABELSET)

    assert prometheus.requests_served(QUERY, 422) == 2
