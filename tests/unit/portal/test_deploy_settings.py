"""Production settings (DEBUG off) pass Django's deployment checks as they are, and every HTTPS
setting can still be switched by its variable; the demo (DEBUG on) has them all off.

The settings are loaded afresh under each case's variables and the checks run in this process
with them (``manage.py check --deploy`` itself runs against the production environment in
tests/integration/test_production_server.py)."""

import os
import secrets
from unittest import mock

from django.core.checks import WARNING, run_checks
from django.test import override_settings

from tests.unit.portal.settings_probe import load_settings

PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
    "DJANGO_ALLOWED_HOSTS": "gpus.example.com",
}
# What the loaded settings may replace while the checks run: everything the deployment checks
# read, not the apps, databases or caches this test process already runs on.
KEPT = {"INSTALLED_APPS", "DATABASES", "CACHES"}


def deploy_check_ids(**variables: str) -> list[str]:
    """The ids of the warnings and errors ``check --deploy`` reports under these variables."""
    loaded = load_settings(keep_django_variables=False, **PRODUCTION, **variables)
    overrides = {name: getattr(loaded, name) for name in dir(loaded) if name.isupper()}
    # Playwright's tests let Django run sync code in their event loop through this variable,
    # which the checks (rightly) report; a deployment never sets it.
    environ = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    with (
        mock.patch.dict(os.environ, environ, clear=True),
        override_settings(**{k: v for k, v in overrides.items() if k not in KEPT}),
    ):
        messages = run_checks(include_deployment_checks=True)
    return sorted(m.id for m in messages if m.level >= WARNING)


def test_production_settings_pass_the_deployment_checks():
    assert deploy_check_ids() == []


def test_switching_off_the_https_redirect_is_what_the_checks_then_report():
    assert "security.W008" in deploy_check_ids(DJANGO_SECURE_SSL_REDIRECT="0")


def test_production_defaults_trust_x_forwarded_proto_and_send_hsts():
    s = load_settings(keep_django_variables=False, **PRODUCTION)

    assert (
        s.SECURE_PROXY_SSL_HEADER,
        s.SECURE_SSL_REDIRECT,
        s.SESSION_COOKIE_SECURE,
        s.CSRF_COOKIE_SECURE,
        s.SECURE_HSTS_SECONDS,
        s.SECURE_HSTS_INCLUDE_SUBDOMAINS,
    ) == (("HTTP_X_FORWARDED_PROTO", "https"), True, True, True, 31536000, True)


def test_each_https_setting_is_switched_by_its_variable():
    s = load_settings(
        keep_django_variables=False,
        **PRODUCTION,
        DJANGO_SECURE_PROXY_SSL_HEADER="none",
        DJANGO_SECURE_SSL_REDIRECT="0",
        DJANGO_SESSION_COOKIE_SECURE="0",
        DJANGO_CSRF_COOKIE_SECURE="0",
        DJANGO_SECURE_HSTS_SECONDS="60",
        DJANGO_SECURE_HSTS_PRELOAD="0",
    )

    assert (
        s.SECURE_PROXY_SSL_HEADER,
        s.SECURE_SSL_REDIRECT,
        s.SESSION_COOKIE_SECURE,
        s.CSRF_COOKIE_SECURE,
        s.SECURE_HSTS_SECONDS,
        s.SECURE_HSTS_PRELOAD,
    ) == (None, False, False, False, 60, False)


def test_another_proxy_header_may_be_named():
    s = load_settings(
        keep_django_variables=False, **PRODUCTION, DJANGO_SECURE_PROXY_SSL_HEADER="X-Scheme"
    )

    assert s.SECURE_PROXY_SSL_HEADER == ("HTTP_X_SCHEME", "https")


def test_the_demo_serves_plain_http():
    s = load_settings(keep_django_variables=False, DJANGO_DEBUG="1")

    assert (
        s.SECURE_PROXY_SSL_HEADER,
        s.SECURE_SSL_REDIRECT,
        s.SESSION_COOKIE_SECURE,
        s.SECURE_HSTS_SECONDS,
    ) == (None, False, False, 0)
