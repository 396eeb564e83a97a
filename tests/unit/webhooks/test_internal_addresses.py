"""A webhook never reaches the portal's own network, however its address is spelled."""

import pytest

from webhooks import targets


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000/hook",
        "http://127.1:9000/hook",
        "http://2130706433:9000/hook",
        "http://0177.0.0.1:9000/hook",
        "http://0x7f.1:9000/hook",
        "http://0.0.0.0:9000/hook",
        "http://[::1]:9000/hook",
        "http://[::ffff:127.0.0.1]:9000/hook",
        "http://10.1.2.3/hook",
        "http://172.16.0.1/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/hook",
        "http://224.0.0.1/hook",
        "http://[fc00::1]/hook",
        "http://[fd12:3456::1]/hook",
        "http://[fe80::1]/hook",
        "http://localhost:9000/hook",
    ],
)
def test_an_internal_address_is_refused_in_every_spelling(url, settings):
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = []

    refusal = targets.url_refusal(url)

    assert refusal is not None
    assert "internal address" in refusal or "portal itself" in refusal


@pytest.mark.parametrize("host", ["93.184.216.34", "[2606:2800:220:1:248:1893:25c8:1946]"])
def test_a_public_address_is_a_receiver(host, settings):
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = []

    assert targets.url_refusal(f"https://{host}/hook") is None


@pytest.mark.parametrize(
    ("allowed", "url"),
    [
        (["10.20.0.0/16"], "http://10.20.3.4/hook"),
        (["10.20.3.4"], "http://10.20.3.4/hook"),
        (["127.0.0.1"], "http://127.0.0.1:9999/hook"),
    ],
)
def test_an_admin_allows_named_internal_hosts(allowed, url, settings):
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = allowed

    assert targets.url_refusal(url) is None


def test_an_allowed_network_allows_nothing_beyond_it(settings):
    settings.WEBHOOKS_ALLOWED_INTERNAL_HOSTS = ["10.20.0.0/16"]

    assert "internal address (10.21.0.1)" in targets.url_refusal("http://10.21.0.1/hook")


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("[::ffff:10.0.0.1]", "10.0.0.1"),
        ("hooks.example.com", None),
        ("cafe", None),
    ],
)
def test_literal_addresses_are_read_as_a_resolver_reads_them(host, address):
    found = targets.ip_of(host)

    assert (str(found) if found else None) == address
