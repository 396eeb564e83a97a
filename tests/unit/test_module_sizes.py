"""No product module is over 600 lines: a module that long holds several concerns, and each
becomes a module of its own (per-resource modules in a package, as netbox's are).

Product code is every app package and the command-line client (``cli/``): not the tests, not the
devcluster, and not the migrations, which Django writes."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 600
PRODUCT = (
    "accounts",
    "billing",
    "cli",
    "clusters",
    "core",
    "gpujobs",
    "interactive",
    "monitoring",
    "portal",
    "reconcile",
    "serving",
    "sharing",
    "tenants",
    "webhooks",
    "workloads",
)
# Top-level packages that are not the product.
NOT_PRODUCT = ("devcluster", "tests")


def product_modules(root: Path = REPO) -> list[Path]:
    """The product's Python modules under ``root``, migrations left out."""
    return [
        path
        for package in PRODUCT
        if (root / package).is_dir()
        for path in sorted((root / package).rglob("*.py"))
        if "migrations" not in path.relative_to(root).parts
    ]


def modules_over(limit: int, root: Path = REPO) -> dict[str, int]:
    """Each product module longer than ``limit`` lines, with its length."""
    lengths = {
        str(path.relative_to(root)): len(path.read_text().splitlines())
        for path in product_modules(root)
    }
    return {path: lines for path, lines in sorted(lengths.items()) if lines > limit}


def test_no_product_module_is_over_600_lines():
    too_long = modules_over(MAX_LINES)

    assert too_long == {}, (
        f"Product modules over {MAX_LINES} lines (split each into modules of one concern): "
        + ", ".join(f"{path} ({lines} lines)" for path, lines in too_long.items())
    )


def test_every_app_and_the_client_are_counted():
    modules = {str(path.relative_to(REPO)) for path in product_modules()}

    assert {"tenants/models.py", "portal/settings.py", "cli/gpuportal/cli.py"} <= modules
    packages = {path.parent.name for path in REPO.glob("*/__init__.py")}
    assert packages - set(PRODUCT) - set(NOT_PRODUCT) == set(), "a new package: product or not?"


def test_a_long_module_is_named_and_a_long_migration_is_not(tmp_path):
    (tmp_path / "tenants" / "api").mkdir(parents=True)
    (tmp_path / "tenants" / "migrations").mkdir()
    (tmp_path / "devcluster").mkdir()
    (tmp_path / "tenants" / "api" / "views.py").write_text("x = 1\n" * 601)
    (tmp_path / "tenants" / "services.py").write_text("x = 1\n" * 600)
    (tmp_path / "tenants" / "migrations" / "0001_initial.py").write_text("x = 1\n" * 900)
    (tmp_path / "devcluster" / "cluster.py").write_text("x = 1\n" * 900)

    assert modules_over(MAX_LINES, tmp_path) == {"tenants/api/views.py": 601}
