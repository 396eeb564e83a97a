"""The portal's settings module loaded afresh, in this process, under given environment variables:
what ``portal/settings.py`` makes of them, without starting an interpreter per case."""

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from unittest import mock

SETTINGS_FILE = Path(__file__).resolve().parents[3] / "portal" / "settings.py"


def load_settings(*, keep_django_variables: bool = True, **variables: str) -> ModuleType:
    """A new module object from ``portal/settings.py``, its module-level code run with the
    process's environment plus ``variables`` (without the ``DJANGO_*`` ones already set, unless
    ``keep_django_variables``). Raises what the settings raise (``ImproperlyConfigured``)."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if keep_django_variables or not key.startswith("DJANGO_")
    }
    spec = importlib.util.spec_from_file_location("portal_settings_probe", SETTINGS_FILE)
    module = importlib.util.module_from_spec(spec)
    with mock.patch.dict(os.environ, {**environ, **variables}, clear=True):
        spec.loader.exec_module(module)
    return module
