"""The command line keeps stdout to `export` lines so `eval "$(python -m devcluster up)"` works."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

REPO_ROOT = Path(__file__).resolve().parents[3]


def devcluster_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "devcluster", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_up_on_a_running_cluster_reuses_it_and_prints_only_export_lines(devcluster):
    result = devcluster_cli("up")

    assert result.stdout.splitlines() == [
        f"export KUBECONFIG={devcluster.kubeconfig}",
        f"export PROMETHEUS_URL={devcluster.prometheus_url}",
    ]
    assert "reusing" in result.stderr


def test_env_prints_the_same_export_lines(devcluster):
    assert devcluster_cli("env").stdout == devcluster_cli("up").stdout


def test_mint_prints_the_path_of_a_kubeconfig_for_the_user(devcluster):
    path = Path(devcluster_cli("mint", "carol", "--group", "team-x").stdout.strip())

    assert path.exists()
    assert "client-certificate-data" in path.read_text()
