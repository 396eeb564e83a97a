"""URL credentials are masked wherever the portal shows or logs a URL (core/redaction.py)."""

import io
import logging

import pytest

from core.redaction import RedactingFilter, redact, without_credentials


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://prom:s3cret@prometheus:9090/", "http://prom:***@prometheus:9090/"),
        ("https://t0ken@prometheus.example.com", "https://***@prometheus.example.com"),
        ("http://prom:p%40ss@prometheus/", "http://prom:***@prometheus/"),
        ("http://prom:a@b@prometheus/", "http://prom:***@prometheus/"),
        ("http://prometheus:9090/", "http://prometheus:9090/"),
        ("http://h/?next=http://u:s3cret@other/", "http://h/?next=http://u:***@other/"),
        ("", ""),
    ],
)
def test_urls_are_shown_without_their_credentials(url, shown):
    assert redact(url) == shown


def test_every_url_in_a_sentence_is_masked_and_nothing_else():
    text = "GET http://a:s3cret@one/x failed; mail ops@example.com or see https://b:t0p@two/."

    assert redact(text) == (
        "GET http://a:***@one/x failed; mail ops@example.com or see https://b:***@two/."
    )


def test_credentials_are_taken_out_of_the_url_for_a_client():
    assert without_credentials("http://prom:p%40ss@prometheus:9090/api") == (
        "http://prometheus:9090/api",
        ("prom", "p@ss"),
    )
    assert without_credentials("http://prometheus:9090") == ("http://prometheus:9090", None)


def _logged(record_args: tuple, exc_info=None) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    try:
        logger.error(*record_args, exc_info=exc_info)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_log_messages_and_their_arguments_are_masked():
    line = _logged(('HTTP Request: GET %s "%s"', "http://prom:s3cret@prometheus/api", "200 OK"))

    assert "s3cret" not in line
    assert "http://prom:***@prometheus/api" in line


def test_tracebacks_in_logs_are_masked():
    try:
        raise ConnectionError("cannot reach http://prom:s3cret@prometheus/")
    except ConnectionError as error:
        line = _logged(("query failed",), exc_info=error)

    assert "s3cret" not in line
    assert "ConnectionError: cannot reach http://prom:***@prometheus/" in line


def test_the_portals_log_handlers_mask_credentials():
    handlers = [h for h in logging.getLogger().handlers if h.name == "console"]
    assert handlers, "the portal's LOGGING has no console handler"
    for handler in handlers:
        assert any(isinstance(f, RedactingFilter) for f in handler.filters)
