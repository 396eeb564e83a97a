"""Where a webhook may point: http(s), a host, not the portal itself (internal addresses:
test_internal_addresses.py)."""

import pytest
from django.core.exceptions import ValidationError

from webhooks.targets import check_webhook_url, url_refusal


@pytest.fixture(autouse=True)
def _portal(settings):
    settings.PORTAL_BASE_URL = "https://portal.example.com"
    settings.ALLOWED_HOSTS = ["portal.example.com", ".gpu.example.org", "localhost", "127.0.0.1"]


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com/services/T000/B000/XXXX",
        "http://receiver.internal:8080/portal",  # resolves to nothing here: checked at sending
        "https://PORTAL.example.net/hook",
    ],
)
def test_accepts_http_and_https_urls_of_other_services(url):
    assert url_refusal(url) is None
    assert check_webhook_url(f"  {url} ") == url


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("", "Enter the http:// or https:// URL"),
        ("   ", "Enter the http:// or https:// URL"),
        (None, "Enter the http:// or https:// URL"),
        (42, "Enter the http:// or https:// URL"),
        ("ftp://files.example.com/hook", "Must start with http:// or https:// (not ftp:)"),
        ("file:///etc/passwd", "Must start with http:// or https:// (not file:)"),
        ("javascript:alert(1)", "Must start with http:// or https://"),
        ("hooks.example.com/x", "Must start with http:// or https://."),
        ("https://", "Must name a host"),
        ("http:///path-only", "Must name a host"),
        ("http://example.com:99999/", "Not a valid URL"),
        ("http://example.com/a b", "spaces or control characters"),
        ("http://example.com/\x00", "spaces or control characters"),
        ("https://example.com/" + "a" * 2000, "at most 2000 characters"),
    ],
)
def test_refuses_what_is_not_an_http_url_with_a_host(url, words):
    assert words in (url_refusal(url) or "")


@pytest.mark.parametrize(
    "url",
    [
        "https://portal.example.com/api/v1/teams/",  # the base URL
        "https://portal.example.com:443/",
        "http://portal.example.com:8080/",  # a host the portal serves, on any port
        "https://Portal.Example.Com./x",
        "https://eu.gpu.example.org/",  # a subdomain pattern in ALLOWED_HOSTS
    ],
)
def test_refuses_the_portal_itself(url):
    assert "portal itself" in url_refusal(url)


def test_refuses_the_loopback_portal_by_its_port(settings):
    settings.PORTAL_BASE_URL = "http://127.0.0.1:8000"
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = ["localhost", "127.0.0.1", "::1"]
    assert "portal itself" in url_refusal("http://localhost:8000/hook")
    assert "portal itself" in url_refusal("http://[::1]:8000/hook")
    assert url_refusal("http://localhost:8001/hook") is None


def test_refuses_the_host_the_request_came_to(settings):
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = ["10.0.0.5"]
    assert "portal itself" in url_refusal("http://10.0.0.5:8000/x", request_host="10.0.0.5:8000")
    assert "portal itself" in url_refusal(
        "https://10.0.0.5/x", request_host="10.0.0.5", request_scheme="https"
    )
    assert url_refusal("http://10.0.0.5:9000/x", request_host="10.0.0.5:8000") is None


@pytest.mark.parametrize("url", ["http://127.0.0.1:9000/hook", "http://[::1]:9000/hook"])
def test_a_local_receiver_an_admin_allows_is_accepted(url, settings):
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = ["127.0.0.1", "::1"]

    assert url_refusal(url) is None


def test_a_wildcard_allowed_hosts_does_not_refuse_everything(settings):
    settings.ALLOWED_HOSTS = ["*"]
    assert url_refusal("https://hooks.example.com/x") is None


def test_error_names_the_url_field():
    with pytest.raises(ValidationError) as raised:
        check_webhook_url("ftp://x")
    assert list(raised.value.message_dict) == ["url"]
