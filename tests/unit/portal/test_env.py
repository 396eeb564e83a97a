"""The settings' environment reads: a value that is not what the setting needs stops the portal
with the variable's name, instead of quietly becoming False, 0 or the default."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env, env_bool, env_float, env_int, env_json, env_list, refuse_renamed
from tests.unit.portal.settings_probe import load_settings


@pytest.mark.parametrize("value", ["1", "true", "True", "YES", "on", " on "])
def test_true_spellings_read_as_true(value):
    assert env_bool("FLAG", False, environ={"FLAG": value}) is True


@pytest.mark.parametrize("value", ["0", "false", "FALSE", "no", "off"])
def test_false_spellings_read_as_false(value):
    assert env_bool("FLAG", True, environ={"FLAG": value}) is False


def test_a_typo_in_a_boolean_is_an_error_naming_the_variable_and_the_accepted_values():
    with pytest.raises(ImproperlyConfigured) as error:
        env_bool("DJANGO_DEBUG", True, environ={"DJANGO_DEBUG": "ture"})

    message = str(error.value)
    assert "DJANGO_DEBUG='ture'" in message
    assert "1, true, yes, on, 0, false, no, off" in message


@pytest.mark.parametrize(
    ("read", "value"),
    [
        (env_int, "ten"),
        (env_int, "1.5"),
        (env_float, "fast"),
        (env_float, "nan"),
        (env_float, "inf"),
    ],
)
def test_a_number_that_is_not_one_is_an_error_naming_the_variable(read, value):
    with pytest.raises(ImproperlyConfigured, match=rf"^EMAIL_PORT='{value}' is not a"):
        read("EMAIL_PORT", 25, environ={"EMAIL_PORT": value})


def test_numbers_are_parsed():
    environ = {"PORT": " 2525 ", "TIMEOUT": "2.5"}

    assert env_int("PORT", 25, environ=environ) == 2525
    assert env_float("TIMEOUT", 10, environ=environ) == 2.5


@pytest.mark.parametrize("read", [env_bool, env_int, env_float, env])
def test_unset_and_empty_read_as_the_default(read):
    assert read("X", "the default", environ={}) == "the default"
    assert read("X", "the default", environ={"X": ""}) == "the default"


def test_lists_split_on_commas_and_drop_blanks():
    environ = {"HOSTS": " a.example , b.example,, "}

    assert env_list("HOSTS", environ=environ) == ["a.example", "b.example"]
    assert env_list("OTHER", "c,d", environ=environ) == ["c", "d"]


def test_a_file_secret_is_read_and_stripped(tmp_path):
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")

    assert env("DJANGO_SECRET_KEY", environ={"DJANGO_SECRET_KEY_FILE": str(secret)}) == "s3cret"


def test_a_typed_value_may_come_from_a_file_and_is_checked_too(tmp_path):
    (tmp_path / "tls").write_text("maybe")

    with pytest.raises(ImproperlyConfigured, match=r"^EMAIL_USE_TLS='maybe' is not a boolean"):
        env_bool("EMAIL_USE_TLS", False, environ={"EMAIL_USE_TLS_FILE": str(tmp_path / "tls")})


def test_an_unreadable_file_is_an_error_naming_the_variable(tmp_path):
    missing = tmp_path / "nowhere"

    with pytest.raises(ImproperlyConfigured, match=f"^DJANGO_SECRET_KEY_FILE names {missing}"):
        env("DJANGO_SECRET_KEY", environ={"DJANGO_SECRET_KEY_FILE": str(missing)})


def test_a_value_and_a_file_for_one_variable_is_an_error(tmp_path):
    (tmp_path / "key").write_text("from-file")
    environ = {"DJANGO_SECRET_KEY": "inline", "DJANGO_SECRET_KEY_FILE": str(tmp_path / "key")}

    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY or DJANGO_SECRET_KEY_FILE"):
        env("DJANGO_SECRET_KEY", environ=environ)


def test_a_renamed_variable_is_an_error_naming_its_new_name():
    renamed = {"PORTAL_LOGIN_URL": "DJANGO_LOGIN_URL"}

    refuse_renamed(renamed, environ={"DJANGO_LOGIN_URL": "/sso/"})
    with pytest.raises(
        ImproperlyConfigured, match="PORTAL_LOGIN_URL is now called DJANGO_LOGIN_URL"
    ):
        refuse_renamed(renamed, environ={"PORTAL_LOGIN_URL": "/sso/"})


def test_settings_refuse_a_misspelt_debug_flag():
    with pytest.raises(ImproperlyConfigured, match="DJANGO_DEBUG='ture' is not a boolean"):
        load_settings(DJANGO_DEBUG="ture")


def test_settings_read_each_variable_under_the_settings_name():
    s = load_settings(
        PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES="250",
        DJANGO_EMAIL_PORT="2525",
        DJANGO_LOGIN_URL="/sso/start/",
    )

    assert (s.PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES, s.EMAIL_PORT, s.LOGIN_URL) == (
        250,
        2525,
        "/sso/start/",
    )


def test_settings_refuse_an_old_variable_name():
    with pytest.raises(
        ImproperlyConfigured,
        match="PORTAL_CONTAINER_CPU_REQUEST_M is now called "
        "PORTAL_CONTAINER_DEFAULT_CPU_REQUEST_MILLICORES",
    ):
        load_settings(PORTAL_CONTAINER_CPU_REQUEST_M="250")


def test_json_reads_a_value_and_refuses_what_is_not_json():
    assert env_json("MAPPING", {}, environ={"MAPPING": '{"g": {"admin": true}}'}) == {
        "g": {"admin": True}
    }
    assert env_json("MAPPING", {}, environ={}) == {}
    with pytest.raises(ImproperlyConfigured) as error:
        env_json("MAPPING", {}, environ={"MAPPING": "{bad"})
    assert "MAPPING='{bad' is not valid JSON" in str(error.value)


def test_single_sign_on_needs_its_provider_named():
    with pytest.raises(ImproperlyConfigured) as error:
        load_settings(OIDC_ENABLED="1", OIDC_RP_CLIENT_ID="portal")
    assert "OIDC_RP_CLIENT_SECRET, OIDC_OP_AUTHORIZATION_ENDPOINT" in str(error.value)
    assert "OIDC_RP_CLIENT_ID" not in str(error.value)


def test_single_sign_on_adds_its_backend_and_keeps_passwords():
    endpoints = {
        f"OIDC_OP_{name}_ENDPOINT": f"https://idp.example.org/{name.lower()}"
        for name in ("AUTHORIZATION", "TOKEN", "USER", "JWKS")
    }
    settings = load_settings(
        OIDC_ENABLED="true", OIDC_RP_CLIENT_ID="portal", OIDC_RP_CLIENT_SECRET="s", **endpoints
    )
    assert settings.AUTHENTICATION_BACKENDS[-2:] == [
        "django.contrib.auth.backends.ModelBackend",
        "accounts.oidc.PortalOIDCBackend",
    ]
    assert "accounts.oidc.PortalOIDCBackend" not in load_settings().AUTHENTICATION_BACKENDS


def test_watcher_leases_default_to_fifteen_seconds_renewed_every_five_under_the_portal_name():
    s = load_settings(
        GPUJOBS_WATCHER_LEADER_ELECTION="",
        GPUJOBS_WATCHER_LEASE_SECONDS="",
        GPUJOBS_WATCHER_RENEW_SECONDS="",
        GPUJOBS_WATCHER_LEASE_NAME="",
        PORTAL_NAME="gpus",
    )

    assert (
        s.GPUJOBS_WATCHER_LEADER_ELECTION,
        s.GPUJOBS_WATCHER_LEASE_SECONDS,
        s.GPUJOBS_WATCHER_RENEW_SECONDS,
        s.GPUJOBS_WATCHER_LEASE_NAME,
    ) == (True, 15, 5.0, "gpus-watcher")


@pytest.mark.parametrize(("lease", "renew"), [("15", "15"), ("3", "5"), ("15", "0")])
def test_settings_refuse_a_renewal_interval_not_shorter_than_the_lease(lease, renew):
    """A holder must stop writing a renewal before another replica may take its Lease."""
    with pytest.raises(ImproperlyConfigured, match="GPUJOBS_WATCHER_RENEW_SECONDS must be"):
        load_settings(GPUJOBS_WATCHER_LEASE_SECONDS=lease, GPUJOBS_WATCHER_RENEW_SECONDS=renew)
