"""``manage.py watch_jobs`` limits glibc's malloc arenas itself (the figure behind it:
``tests/bench/bench_watcher_memory.py``), unless the environment says otherwise. Each check runs
in a fresh interpreter: the limit holds for the whole process."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
PROGRAM = (
    "from gpujobs.management.commands.watch_jobs import limit_malloc_arenas; "
    "print(limit_malloc_arenas())"
)

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


def limited(**env) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=REPO_ROOT,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_watcher_limits_mallocs_arenas():
    assert limited() == "True"


def test_malloc_arena_max_in_the_environment_wins():
    assert limited(MALLOC_ARENA_MAX="4") == "False"
