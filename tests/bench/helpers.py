"""What the benchmarks share: percentiles, cleanup steps retried while the shared cluster's API
server is away, the portal's processes (a Celery worker, the watcher) started and stopped around
a run, grants seeded in bulk, and pages rendered in-process."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kubernetes.client.rest import ApiException

REPO_ROOT = Path(__file__).resolve().parents[2]


def percentile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def patiently(
    what: str, action: Callable[[], object], *, log: Callable[[str], None], seconds: float = 120
) -> None:
    """Run a cleanup step, retrying while the shared cluster's API server is away."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            action()
            return
        except ApiException as error:
            if error.status == 404:
                return
            problem = error
        except Exception as error:
            problem = error
        if time.monotonic() > deadline:
            log(f"could not {what}: {problem}")
            return
        time.sleep(2)


@contextlib.contextmanager
def holding(handle) -> Iterator[None]:
    """Hold the shared devcluster for the block as a test session does: a devcluster that a
    test session started is stopped by the last session to end (``devcluster.pytest_plugin``
    counts the leases in ``<state>/pytest-sessions``), and a benchmark that runs for many
    minutes must count among them, or its nodes and namespaces go with the cluster."""
    lease = handle.settings.state_dir / "pytest-sessions" / str(os.getpid())
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.touch()
    try:
        yield
    finally:
        lease.unlink(missing_ok=True)


def start(command: list[str], log_path: Path, ready: str, env: dict) -> subprocess.Popen:
    """Start a process of the portal's and wait until its log says ``ready``."""
    with open(log_path, "w") as out:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 120
    while ready not in log_path.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            sys.exit(f"{command[2:4]} did not start:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)
    return process


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def grants_for(requests, *, granted_by, state: str = "active") -> list:
    """Unsaved grants of approved requests, whole, for ``bulk_create``."""
    from tenants.models import QuotaGrant

    return [
        QuotaGrant(
            request=r,
            team=r.team,
            cluster=r.cluster,
            gpu_resource=r.gpu_resource,
            gpu_model=r.gpu_model,
            gpus=r.gpus,
            starts_on=r.starts_on,
            ends_on=r.ends_on,
            granted_by=granted_by,
            state=state,
        )
        for r in requests
    ]


def in_process_storages() -> dict:
    """``STORAGES`` for rendering pages in-process with DEBUG off: static URLs without the
    manifest that collectstatic writes."""
    from django.conf import settings

    return {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
