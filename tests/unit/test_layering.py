"""The layers of ARCHITECTURE.md hold in the code: each app imports only the layers below it,
the workload kinds never import each other, nothing of the product imports the devcluster or the
command-line client, and the kernel (``core``) imports no app and never loads Celery."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.python_imports import imported_modules

REPO = Path(__file__).resolve().parents[2]

# Lower numbers are lower layers: an app imports only apps of a lower layer. Apps on one layer
# never import each other (the workload kinds; the listeners to tenants' events).
LAYERS = {
    "core": 0,
    "clusters": 1,
    "tenants": 2,
    "reconcile": 3,  # what reaches the clusters, built from who holds what (tenants)
    "sharing": 3,  # sharing layouts: grants (tenants) changed as the nodes (clusters) follow
    "monitoring": 4,
    "billing": 5,
    "workloads": 6,
    "gpujobs": 7,
    "serving": 7,
    "interactive": 7,
    "accounts": 8,
    "webhooks": 8,
    "portal": 9,  # the project's wiring: settings, URLs, the Celery app, error handlers
}
TOOLS = ("devcluster", "cli")  # never imported by the product


def imports_of(app: str) -> dict[str, set[str]]:
    """The product apps and tools ``app`` imports, each with the files that do."""
    found: dict[str, set[str]] = {}
    for path in (REPO / app).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for module in imported_modules(path):
            top = module.split(".")[0]
            if top != app and (top in LAYERS or top in TOOLS):
                found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


@pytest.mark.parametrize("app", [app for app in LAYERS if (REPO / app).is_dir()])
def test_each_app_imports_only_the_layers_below_it(app):
    wrong = {
        imported: sorted(files)
        for imported, files in imports_of(app).items()
        if imported in TOOLS or LAYERS[imported] >= LAYERS[app]
    }

    assert wrong == {}, f"{app} imports what it may not: {wrong}"


def test_no_function_imports_tasks_to_dodge_an_import_loop():
    """Tasks import the services that send them, so a service sends a task by its registered
    name (``current_app.tasks[...]``), never by importing the tasks module inside a function."""
    hidden = []
    for app in LAYERS:
        for path in (REPO / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for function in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    names = (
                        [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
                        if isinstance(node, ast.ImportFrom)
                        else [a.name for a in node.names]
                        if isinstance(node, ast.Import)
                        else []
                    )
                    if any(name.endswith(".tasks") for name in names) and function.name != "ready":
                        hidden.append(f"{path.relative_to(REPO)}:{node.lineno}")

    assert hidden == []


def test_importing_the_kernel_loads_neither_celery_nor_an_app():
    modules = sorted(
        f"core.{path.stem}" for path in (REPO / "core").glob("*.py") if path.stem != "__init__"
    )
    # Django and DRF set up bare (the kernel's API pieces need them), none of the portal's apps.
    probe = (
        "import sys, django\n"
        "from django.conf import settings\n"
        "settings.configure(INSTALLED_APPS=['django.contrib.contenttypes',"
        " 'django.contrib.auth', 'rest_framework', 'drf_spectacular'])\n"
        "django.setup()\n"
        f"for name in {modules!r}: __import__(name)\n"
        f"apps = {sorted(set(LAYERS) - {'core'})!r}\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'celery', *apps})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": ""},
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
