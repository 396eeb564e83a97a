"""The Prometheus client against a stand-in transport, for what a real Prometheus cannot be made
to show or do on cue: the parameters the client sends, Prometheus giving up on a query by itself,
and an HTML page from a gateway in front of it. Everything else the client meets comes from real
Prometheus servers: tests/integration/monitoring/test_prometheus_client.py."""

import httpx
import pytest
from django.core.cache import cache

from monitoring.prometheus import (
    PrometheusClient,
    PrometheusNotConfigured,
    PrometheusQueryError,
    PrometheusTimeout,
)

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


def test_a_range_query_asks_for_its_step_and_for_prometheus_to_give_up_first():
    # What the client sends, which Prometheus does not tell.
    calls = []

    client(answering(MATRIX, calls=calls)).query_range("up", start=0, end=60, step=15)

    assert calls[0].url.params["step"] == "15s"
    assert calls[0].url.params["timeout"] == "1500ms"  # Prometheus gives up before we do


def test_no_url_is_not_configured():
    with pytest.raises(PrometheusNotConfigured):
        PrometheusClient("")


def test_prometheus_own_timeout_is_a_timeout():
    # Prometheus gives up by itself only on a query slower than its --query.timeout, which it
    # checks between evaluation steps: no query was reliably slow enough on cue.
    body = {"status": "error", "errorType": "timeout", "error": "query timed out"}
    with pytest.raises(PrometheusTimeout):
        client(answering(body, status=503)).query("up")


def test_an_answer_that_is_not_json_is_a_query_error():
    # A gateway in front of Prometheus answers like this; Prometheus never does.
    def html(request):
        return httpx.Response(502, text="<html>bad gateway</html>")

    with pytest.raises(PrometheusQueryError, match="HTTP 502"):
        client(html).query("up")
