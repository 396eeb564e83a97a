"""Strict reads of settings from the environment, for ``portal/settings.py``.

A value that cannot be what the setting needs is an error naming the variable, raised when the
settings load: ``DJANGO_DEBUG=ture`` stops the portal instead of quietly turning DEBUG off.
An empty value counts as unset. Any variable may instead name a file that holds its value, with a
``_FILE`` suffix (``DJANGO_SECRET_KEY_FILE=/run/secrets/key``), as container secrets are mounted.

Each function reads ``os.environ`` unless given another mapping (the unit tests give a dict).
"""

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")

T = TypeVar("T")


def env_raw(name: str, *, environ: Mapping[str, str] = os.environ) -> str | None:
    """``$NAME``, or the contents of the file ``$NAME_FILE`` names; None when unset or empty."""
    value = environ.get(name, "")
    file_path = environ.get(f"{name}_FILE", "")
    if value and file_path:
        raise ImproperlyConfigured(f"Set {name} or {name}_FILE, not both.")
    if file_path:
        try:
            value = Path(file_path).read_text().strip()
        except OSError as error:
            raise ImproperlyConfigured(
                f"{name}_FILE names {file_path}, which cannot be read ({error.strerror})."
            ) from error
    return value or None


def env(name: str, default: str = "", *, environ: Mapping[str, str] = os.environ) -> str:
    value = env_raw(name, environ=environ)
    return default if value is None else value


def env_list(name: str, default: str = "", *, environ: Mapping[str, str] = os.environ) -> list[str]:
    """A comma-separated list; blanks around items and empty items are dropped."""
    return [item.strip() for item in env(name, default, environ=environ).split(",") if item.strip()]


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] = os.environ) -> bool:
    expected = f"a boolean: one of {', '.join(TRUE + FALSE)}"
    return _typed(name, default, _parse_bool, expected, environ)


def env_int(name: str, default: int, *, environ: Mapping[str, str] = os.environ) -> int:
    return _typed(name, default, int, "a whole number", environ)


def env_float(name: str, default: float, *, environ: Mapping[str, str] = os.environ) -> float:
    return _typed(name, default, _parse_float, "a number", environ)


def env_json(name: str, default: T, *, environ: Mapping[str, str] = os.environ) -> T | Any:
    """A JSON value (an object, a list, ...); what it must hold is checked by its reader."""
    return _typed(name, default, json.loads, "valid JSON", environ)


def _typed(
    name: str, default: T, parse: Callable[[str], T], expected: str, environ: Mapping[str, str]
) -> T:
    value = env_raw(name, environ=environ)
    if value is None:
        return default
    try:
        return parse(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not {expected}.") from None


def _parse_bool(value: str) -> bool:
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise ValueError(value)


def _parse_float(value: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def refuse_renamed(renamed: Mapping[str, str], *, environ: Mapping[str, str] = os.environ) -> None:
    """Stop on a variable that was renamed (old name -> new name): set, it would be ignored."""
    for old, new in renamed.items():
        if environ.get(old) or environ.get(f"{old}_FILE"):
            raise ImproperlyConfigured(f"{old} is now called {new}: set that instead.")
