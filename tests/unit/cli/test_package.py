"""`pip install ./cli` works: the package builds into a wheel with the console script, offline
(setuptools from the environment, no download)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

CLI = Path(__file__).resolve().parents[3] / "cli"


def test_cli_builds_into_a_wheel_with_its_console_script(tmp_path):
    source = tmp_path / "cli"
    # A copy: setuptools writes build/ and *.egg-info beside the sources.
    shutil.copytree(
        CLI, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )

    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )

    assert built.returncode == 0, built.stdout + built.stderr

    (wheel,) = (tmp_path / "dist").glob("gpuportal-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = archive.read(entry_points).decode()
        metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert {"gpuportal/cli.py", "gpuportal/client.py", "gpuportal/follow.py"} <= names
    assert "gpuportal = gpuportal.cli:main" in scripts
    assert "Requires-Dist: httpx" in metadata
