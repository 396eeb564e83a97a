"""requirements-image.txt, what the portal's image installs, is written from requirements.in and
requirements.txt, and holds every package the product imports."""

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import image_requirements  # noqa: E402

from tests.unit.python_imports import imported_modules  # noqa: E402
from tests.unit.test_layering import LAYERS  # noqa: E402


def test_the_file_is_up_to_date():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "image_requirements.py"), "--check"],
        capture_output=True,
        text=True,
    )

    assert result.returncode == 0, result.stderr


def test_it_pins_what_requirements_txt_pins_and_nothing_for_development():
    image = image_requirements.pins((REPO / "requirements-image.txt").read_text())
    everything = image_requirements.pins((REPO / "requirements.txt").read_text())

    assert image.items() <= everything.items()
    assert {"pytest", "ruff", "playwright", "mkdocs", "schemathesis"}.isdisjoint(image)
    assert {"django", "celery", "gunicorn", "psycopg-binary", "async-timeout"} <= set(image)


def test_every_package_the_product_imports_is_in_the_image():
    installed = image_requirements.pins((REPO / "requirements-image.txt").read_text())
    providers = metadata.packages_distributions()
    missing = {}
    for app in LAYERS:  # every app of the product, the kernel included
        for path in (REPO / app).rglob("*.py"):
            for module in imported_modules(path):
                for distribution in providers.get(module.split(".")[0], []):
                    if canonicalize_name(distribution) not in installed:
                        missing.setdefault(distribution, set()).add(str(path))

    assert missing == {}


def test_a_marker_for_an_older_python_still_brings_its_package_in():
    needed = image_requirements.closure(image_requirements.runtime_requirements("redis==8.1.0\n"))

    assert "async-timeout" in needed
