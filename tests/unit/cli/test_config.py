"""The stored token: only its owner can read it, and it goes only to the server it came from."""

import os
import stat

import pytest

from gpuportal import config


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(config.URL_VARIABLE, raising=False)
    monkeypatch.delenv(config.TOKEN_VARIABLE, raising=False)
    return tmp_path


def test_login_is_stored_under_xdg_config_home_readable_by_its_owner_only(home):
    old = os.umask(0o022)  # a usual umask would leave a new file readable by all
    try:
        path = config.save_login(
            url="https://portal.example/", token="gpup_secret", token_id=4, username="lena"
        )
    finally:
        os.umask(old)

    assert path == home / "gpuportal" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert config.read_file() == {
        "url": "https://portal.example",
        "token": "gpup_secret",
        "token_id": 4,
        "username": "lena",
    }


def test_rewriting_a_file_that_others_could_read_makes_it_private(home):
    path = home / "gpuportal" / "config.json"
    path.parent.mkdir()
    path.write_text("{}")
    path.chmod(0o644)

    config.save_login(url="https://p.example", token="t", token_id=None, username="u")

    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_without_xdg_config_home_the_file_is_under_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert config.config_path() == tmp_path / ".config" / "gpuportal" / "config.json"


def test_environment_overrides_the_file(home, monkeypatch):
    config.save_login(url="https://a.example", token="file-token", token_id=1, username="u")
    monkeypatch.setenv(config.TOKEN_VARIABLE, "env-token")

    assert config.load() == config.Settings(url="https://a.example", token="env-token")


def test_stored_token_is_never_sent_to_another_server(home, monkeypatch):
    config.save_login(url="https://a.example", token="file-token", token_id=1, username="u")

    assert config.load().token == "file-token"
    assert config.load("https://a.example/").token == "file-token"
    assert config.load("https://b.example").token is None
    monkeypatch.setenv(config.URL_VARIABLE, "https://b.example")
    assert config.load() == config.Settings(url="https://b.example", token=None)


def test_a_bare_host_means_https():
    assert config.normalise_url(" portal.example/ ") == "https://portal.example"
    assert config.normalise_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000"


def test_a_damaged_file_is_an_error_that_says_what_to_do(home):
    path = home / "gpuportal" / "config.json"
    path.parent.mkdir()
    path.write_text("not json")

    with pytest.raises(config.ConfigError, match="log in again"):
        config.load()
