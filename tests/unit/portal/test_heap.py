"""Served processes freeze what they made while starting (portal/heap.py): checked in a fresh
interpreter per entry point, as gunicorn and runserver import them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import gc, json, sys
import {module}
print(json.dumps({{
    "frozen": gc.get_freeze_count(),
    "walked_by_a_full_pass": len(gc.get_objects(generation=2)),
    "views_imported": all(m in sys.modules for m in ("monitoring.views", "gpujobs.views")),
}}))
"""


@pytest.mark.parametrize("module", ["portal.asgi", "portal.wsgi"])
def test_the_served_application_freezes_its_startup_objects(module):
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    heap = json.loads(result.stdout.strip().splitlines()[-1])
    assert heap["views_imported"], "the URLconf's views load before the freeze, not at a request"
    assert heap["frozen"] > 20_000, heap
    # What a full collection still walks is what was made after the freeze: next to nothing.
    assert heap["walked_by_a_full_pass"] < heap["frozen"] / 20, heap
