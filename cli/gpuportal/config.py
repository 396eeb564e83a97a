"""Where the client keeps its server URL and API token.

The file is ``$XDG_CONFIG_HOME/gpuportal/config.json`` (``~/.config/gpuportal/config.json``
without the variable), readable by its owner only (0600, in a 0700 folder): it holds a secret.
``GPUPORTAL_URL`` and ``GPUPORTAL_TOKEN`` override what it says, for scripts and CI that keep
the token elsewhere; a ``--url`` option overrides both.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

URL_VARIABLE = "GPUPORTAL_URL"
TOKEN_VARIABLE = "GPUPORTAL_TOKEN"


class ConfigError(Exception):
    """The configuration file cannot be read as the client wrote it."""


@dataclass(frozen=True)
class Settings:
    """What a command talks to: the portal's base URL and the token (either may be missing)."""

    url: str | None
    token: str | None
    token_id: int | None = None


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "gpuportal" / "config.json"


def normalise_url(url: str) -> str:
    """The portal's base URL without a trailing slash; a bare host gets ``https://``."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"https://{url}"
    return url


def read_file(path: Path | None = None) -> dict:
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise ConfigError(f"{path} is not JSON; delete it and log in again") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object; delete it and log in again")
    return data


def write_file(data: dict, path: Path | None = None) -> Path:
    """Write the file readable by its owner only. The folder is made 0700; the file is created
    0600 before anything is written to it, and replaced whole (never half-written)."""
    path = path or config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode is masked by the umask; this is not
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=2)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def remove_file(path: Path | None = None) -> bool:
    path = path or config_path()
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def load(url: str | None = None) -> Settings:
    """The settings a command uses: ``url`` (the ``--url`` option), else ``GPUPORTAL_URL``, else
    the file's; the token from ``GPUPORTAL_TOKEN``, else the file's when the file's server is the
    one in use (a token is never sent to another server)."""
    stored = read_file()
    stored_url = stored.get("url") or None
    chosen = url or os.environ.get(URL_VARIABLE) or stored_url
    chosen = normalise_url(chosen) if chosen else None
    token = os.environ.get(TOKEN_VARIABLE) or None
    token_id = None
    if token is None and stored_url and chosen == normalise_url(stored_url):
        token = stored.get("token") or None
        token_id = stored.get("token_id")
    return Settings(url=chosen, token=token, token_id=token_id)


def save_login(*, url: str, token: str, token_id: int | None, username: str) -> Path:
    return write_file(
        {"url": normalise_url(url), "token": token, "token_id": token_id, "username": username}
    )
