"""Load the ``kubernetes`` client package lazily: only the modules a process uses.

``import kubernetes`` (and so any ``from kubernetes.x import y``, which runs the package's
``__init__`` first) imports the whole generated client: every API class and some 800 model
modules, about 28 MiB of resident memory in each process. The portal uses little of it: objects
go in and come out as plain dicts (``clusters.kube``), so what it needs is ``ApiClient``,
``Configuration``, ``ApiException``, the kubeconfig loaders and the watch's line reader.

``install()`` (run by ``clusters/__init__.py``, so before any of the portal's modules imports
``kubernetes``: only ``clusters/`` does) puts stand-ins for the packages ``kubernetes``,
``kubernetes.client`` and ``kubernetes.client.models`` in ``sys.modules``, each the real package
(its ``__path__``, so submodules import as usual) with its ``__init__`` not run yet. A name that
is a submodule imports just that submodule; ``kubernetes.client``'s ``Configuration``,
``ApiClient`` and ``ApiException`` come from their own small modules; any other name (a model
class, ``CoreV1Api``, ``__version__``, ``__all__``) runs the package's real ``__init__`` on
first use, and the package is then what it always was. So code that uses more of the client
keeps working unchanged; it only pays for it when it does.

When ``kubernetes`` was imported before ``install()`` (a script that imports it first), the
stand-ins are not made and nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

# Names of ``kubernetes.client`` served from one small module instead of the whole package.
_CLIENT_NAMES = {
    "ApiClient": "api_client",
    "Configuration": "configuration",
    "ApiException": "exceptions",
}
# Dunder names that the real ``__init__`` defines; others are the import system's probes.
_PACKAGE_DUNDERS = {"__all__", "__version__", "__project__"}

_lock = threading.RLock()


def _stand_in(name: str, names: dict[str, str] | None = None) -> types.ModuleType:
    spec = importlib.util.find_spec(name)
    module = importlib.util.module_from_spec(spec)
    state = {"loaded": False}

    def __getattr__(attr: str):
        if attr.startswith("__") and attr not in _PACKAGE_DUNDERS:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        if names and attr in names:
            return getattr(importlib.import_module(f"{name}.{names[attr]}"), attr)
        if not attr.startswith("__") and importlib.util.find_spec(f"{name}.{attr}") is not None:
            return importlib.import_module(f"{name}.{attr}")
        with _lock:
            if not state["loaded"]:
                state["loaded"] = True
                # The package's own __init__, in this module: it becomes the whole package.
                spec.loader.exec_module(module)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__
    sys.modules[name] = module
    return module


def install() -> bool:
    """Put the stand-ins in place unless ``kubernetes`` is imported already; whether it did."""
    with _lock:
        if "kubernetes" in sys.modules:
            return False
        package = _stand_in("kubernetes")
        package.client = _stand_in("kubernetes.client", _CLIENT_NAMES)
        package.client.models = _stand_in("kubernetes.client.models")
        return True


def fully_loaded() -> bool:
    """Whether the whole client package has been imported (a test's check)."""
    return "kubernetes.client.models.v1_job" in sys.modules
