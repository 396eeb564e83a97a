"""Production settings (DEBUG off) pass Django's deployment checks as they are, and every HTTPS
setting can still be switched by its variable; the demo (DEBUG on) has them all off."""

import os
import secrets
import subprocess
import sys

from tests.unit.portal.test_env import REPO_ROOT, with_settings

PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
    "DJANGO_ALLOWED_HOSTS": "gpus.example.com",
}


def check_deploy(**variables: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env={**environ, **PRODUCTION, **variables},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_the_deployment_checks():
    checked = check_deploy()

    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert "System check identified no issues" in checked.stdout


def test_switching_off_the_https_redirect_is_what_the_checks_then_report():
    checked = check_deploy(DJANGO_SECURE_SSL_REDIRECT="0")

    assert checked.returncode != 0
    assert "security.W008" in checked.stderr


def test_production_defaults_trust_x_forwarded_proto_and_send_hsts():
    loaded = with_settings(
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS)",
        **PRODUCTION,
    )

    assert loaded.stdout.strip() == (
        "('HTTP_X_FORWARDED_PROTO', 'https') True True True 31536000 True"
    ), loaded.stderr


def test_each_https_setting_is_switched_by_its_variable():
    loaded = with_settings(
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_PRELOAD)",
        **PRODUCTION,
        DJANGO_SECURE_PROXY_SSL_HEADER="none",
        DJANGO_SECURE_SSL_REDIRECT="0",
        DJANGO_SESSION_COOKIE_SECURE="0",
        DJANGO_CSRF_COOKIE_SECURE="0",
        DJANGO_SECURE_HSTS_SECONDS="60",
        DJANGO_SECURE_HSTS_PRELOAD="0",
    )

    assert loaded.stdout.split() == ["None", "False", "False", "False", "60", "False"], (
        loaded.stderr
    )


def test_another_proxy_header_may_be_named():
    loaded = with_settings(
        "print(s.SECURE_PROXY_SSL_HEADER)", **PRODUCTION, DJANGO_SECURE_PROXY_SSL_HEADER="X-Scheme"
    )

    assert loaded.stdout.strip() == "('HTTP_X_SCHEME', 'https')", loaded.stderr


def test_the_demo_serves_plain_http():
    loaded = with_settings(
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, "
        "s.SECURE_HSTS_SECONDS)",
        DJANGO_DEBUG="1",
    )

    assert loaded.stdout.split() == ["None", "False", "False", "0"], loaded.stderr
