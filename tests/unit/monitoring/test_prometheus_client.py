"""The Prometheus client's answers and failures, against a fake transport (no network)."""

import httpx
import pytest
from django.core.cache import cache

from monitoring.prometheus import (
    PrometheusClient,
    PrometheusNotConfigured,
    PrometheusQueryError,
    PrometheusTimeout,
    PrometheusUnreachable,
    record_queries,
)

VECTOR = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [{"metric": {"pod": "p"}, "value": [1700000000, "73"]}],
    },
}
MATRIX = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [{"metric": {"pod": "p"}, "values": [[1, "1"], [2, "NaN"]]}],
    },
}


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def client(handler, **kwargs):
    kwargs.setdefault("cache_seconds", 0)
    kwargs.setdefault("timeout", 2)
    return PrometheusClient(
        "http://prometheus.test", transport=httpx.MockTransport(handler), **kwargs
    )


def answering(body, status=200, calls=None):
    def handler(request):
        if calls is not None:
            calls.append(request)
        return httpx.Response(status, json=body)

    return handler


def test_instant_query_returns_labels_and_values():
    (sample,) = client(answering(VECTOR)).query("up")
    assert sample.labels == {"pod": "p"}
    assert sample.value == 73


def test_range_query_returns_points_and_reads_nan():
    calls = []
    (series,) = client(answering(MATRIX, calls=calls)).query_range("up", start=0, end=60, step=15)
    assert series.timestamps == [1, 2]
    assert series.values[0] == 1
    assert series.values[1] != series.values[1]  # NaN
    assert calls[0].url.params["step"] == "15s"
    assert calls[0].url.params["timeout"] == "1500ms"  # Prometheus gives up before we do


def test_no_url_is_not_configured():
    with pytest.raises(PrometheusNotConfigured):
        PrometheusClient("")


def test_connection_refused_is_unreachable():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(PrometheusUnreachable, match="cannot be reached"):
        client(refuse).query("up")


def test_a_slow_answer_is_a_timeout():
    def slow(request):
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(PrometheusTimeout, match="did not answer within 2 s"):
        client(slow).query("up")


def test_an_unreachable_prometheus_is_not_asked_again_by_the_same_client():
    calls = []

    def refuse(request):
        calls.append(request)
        raise httpx.ConnectError("refused", request=request)

    prometheus = client(refuse)
    for _ in range(3):
        with pytest.raises(PrometheusUnreachable):
            prometheus.query("up")
    assert len(calls) == 1


def test_a_refused_query_is_a_query_error_with_prometheus_reason():
    body = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
    with pytest.raises(PrometheusQueryError, match=r"bad_data.*parse error"):
        client(answering(body, status=400)).query("up{")


def test_prometheus_own_timeout_is_a_timeout():
    body = {"status": "error", "errorType": "timeout", "error": "query timed out"}
    with pytest.raises(PrometheusTimeout):
        client(answering(body, status=503)).query("up")


def test_an_answer_that_is_not_json_is_a_query_error():
    def html(request):
        return httpx.Response(502, text="<html>bad gateway</html>")

    with pytest.raises(PrometheusQueryError, match="HTTP 502"):
        client(html).query("up")


def test_answers_are_cached_briefly_and_recorded():
    calls = []
    prometheus = client(answering(VECTOR, calls=calls), cache_seconds=30)
    with record_queries() as records:
        prometheus.query("up", at=100)
        prometheus.query("up", at=100)
        prometheus.query("up", at=200)
    assert len(calls) == 2
    assert [r.cached for r in records] == [False, True, False]
    assert records[0].params == {"query": "up", "time": "100.000"}


def test_errors_are_not_cached():
    calls = []
    body = {"status": "error", "errorType": "execution", "error": "boom"}
    prometheus = client(answering(body, status=422, calls=calls), cache_seconds=30)
    for _ in range(2):
        with pytest.raises(PrometheusQueryError):
            prometheus.query("up")
    assert len(calls) == 2
