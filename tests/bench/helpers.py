"""What the benchmarks share: percentiles, cleanup steps retried while the shared cluster's API
server is away, the portal's processes (a Celery worker, the watcher) started and stopped around
a run, grants seeded in bulk, and pages rendered in-process."""

import contextlib
import datetime
import os
import re
import shutil
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


def bulk_create_in_chunks(model, count: int, make: Callable[[int], object], chunk=10_000) -> None:
    """``count`` rows of ``model``, ``make(i)`` each, stored ``chunk`` at a time: 200,000
    model instances built at once take a GiB."""
    for first in range(0, count, chunk):
        model.objects.bulk_create(
            [make(i) for i in range(first, min(first + chunk, count))], batch_size=2000
        )


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


def signed_in_client(user):
    """A Django test client signed in as ``user``, its middleware loaded as a served worker's
    is from its start: a fresh client loads it on its first request (WhiteNoise alone scans
    every static file, some 80 ms), which no request to a running portal pays."""
    from django.test import Client

    client = Client()
    client.handler.load_middleware()
    client.force_login(user)
    return client


def team_namespace_labels(slug: str) -> dict[str, str]:
    """The labels by which the portal (under this run's ``PORTAL_NAME``) owns a team's
    namespace, for a benchmark that makes the namespace itself as a reconcile would."""
    from django.conf import settings

    from clusters.vocabulary import MANAGED_BY_LABEL, TEAM_LABEL

    return {MANAGED_BY_LABEL: settings.PORTAL_NAME, TEAM_LABEL: slug}


def run_apart(name: str) -> None:
    """Before ``django.setup()``: run this benchmark's portal apart from others on the shared
    devcluster and broker. Its worker and watcher take only its Celery tasks, and its namespaces
    and Kueue objects carry a portal name of its own, so that the admission policies a reconcile
    under another name installs (GPU pods only on ``hardware-type=gpu``, the default name's, or
    another benchmark's nodes) never apply to its pods, whichever benchmark ran first."""
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = f"bench-{name}-{os.getpid()}"
    os.environ["PORTAL_NAME"] = f"gpu-portal-bench-{name}"


# The devcluster's processes, by the name the kernel gives them (at most 15 characters).
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kwok", "kueue")
# The services a run shares with the portal, by process name, as ``CpuMeter`` groups them.
DATABASE_AND_BROKER = {"PostgreSQL": ("postgres",), "Redis": ("redis-server",)}
SHARED_SERVICES = {"control plane": CONTROL_PLANE, **DATABASE_AND_BROKER}
_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds_of(pid: int) -> tuple[str, float]:
    """A process's name and the CPU time it and its reaped children used, in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    # utime, stime, cutime, cstime: the 14th to 17th fields, counted from the pid.
    return name, sum(int(value) for value in fields[11:15]) / _TICKS


class CpuMeter:
    """CPU seconds used by groups of processes between ``start()`` and ``stop()``: by pid (the
    portal's worker and watcher), by name (``CONTROL_PLANE``, ``postgres``, ``redis-server``; a
    process that exits meanwhile counts in its parent's total once reaped, as PostgreSQL's
    backends do), and this process's own with the children it reaped (a kubectl it ran). For
    the benchmarks' reports of where the CPU of a run went, beside the alternative's run."""

    def __init__(
        self,
        *,
        pids: dict[str, int | list[int]] | None = None,
        names: dict[str, tuple] | None = None,
    ):
        self.pids = dict(pids or {})
        self.names = dict(names or {})
        self._started: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        totals = dict.fromkeys([*self.pids, *self.names, "benchmark process"], 0.0)
        for group, pids in self.pids.items():
            for pid in [pids] if isinstance(pids, int) else pids:
                with contextlib.suppress(OSError, ValueError):
                    totals[group] += _cpu_seconds_of(pid)[1]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                name, seconds = _cpu_seconds_of(int(entry.name))
            except (OSError, ValueError):
                continue
            for group, names in self.names.items():
                if name in names:
                    totals[group] += seconds
        own = os.times()  # with the children it ran and reaped (kubectl)
        totals["benchmark process"] = (
            own.user + own.system + own.children_user + own.children_system
        )
        return totals

    def start(self) -> None:
        self._started = self._now()

    def stop(self) -> dict[str, float]:
        ended = self._now()
        self.used = {
            group: round(ended[group] - self._started.get(group, 0.0), 2) for group in ended
        }
        return self.used


KLOG_LINE = re.compile(r"^[IWE](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})")


def _klog_time(line: str) -> float | None:
    """The wall-clock time (seconds since the epoch, UTC) of a klog line, or None."""
    found = KLOG_LINE.match(line)
    if not found:
        return None
    month, day, hour, minute, second, micro = map(int, found.groups())
    now = datetime.datetime.now(datetime.UTC)
    stamp = now.replace(month=month, day=day, hour=hour, minute=minute, second=second,
                        microsecond=micro)  # fmt: skip
    return stamp.timestamp()


def run_kubectl(
    command: list[str], *, cache: Path, timeout: float | None = None, fresh_cache: bool = True
) -> dict:
    """Run a kubectl command that writes (``apply``, ``create``) with a fresh discovery cache
    (or, with ``fresh_cache`` False, the one an earlier run left in ``cache``) and ``-v=6``:
    its whole time, that time split at the start of its first write into process start plus
    API discovery and the writing itself, and its reads and writes. Exits the benchmark if
    kubectl fails."""
    if fresh_cache:
        shutil.rmtree(cache, ignore_errors=True)
    wall_started = time.time()
    started = time.perf_counter()
    run = subprocess.run(
        [*command, "--cache-dir", str(cache), "-v=6"],
        capture_output=True, text=True, check=False, timeout=timeout,
        env={**os.environ, "TZ": "UTC"},
    )  # fmt: skip
    seconds = time.perf_counter() - started
    wall_ended = wall_started + seconds
    if run.returncode != 0:
        sys.exit(f"kubectl failed:\n{run.stderr[-3000:]}")
    verbs, first_write = [], None
    for line in run.stderr.splitlines():
        found = re.search(r'"Response" verb="(\w+)".*?milliseconds=(\d+)', line) or re.search(
            r"\] (GET|PATCH|POST|PUT|DELETE) https\S+ \d+ .*? in (\d+) milliseconds", line
        )
        if not found:
            continue
        verbs.append(found.group(1))
        if found.group(1) != "GET" and first_write is None:
            logged = _klog_time(line)
            if logged is not None:
                first_write = logged - int(found.group(2)) / 1000
    writing_seconds = wall_ended - first_write if first_write else seconds
    return {
        "seconds": round(seconds, 3),
        "start_and_discovery_seconds": round(seconds - writing_seconds, 3),
        "apply_seconds": round(writing_seconds, 3),
        "reads": sum(v == "GET" for v in verbs),
        "writes": sum(v != "GET" for v in verbs),
        "stdout": run.stdout,
    }


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (gunicorn's workers, of its master)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError):
                stat = (entry / "stat").read_text()
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                    children.append(int(entry.name))
    return children


def make_namespace(core, name: str, *, gpus: int | None) -> None:
    """A namespace the portal (under this run's name) owns for a team of that slug, with a
    quota of ``gpus`` GPUs (none: no quota), once the quota controller counts in it."""
    labels = team_namespace_labels(name)
    core.create_namespace({"apiVersion": "v1", "metadata": {"name": name, "labels": labels}})
    if gpus is None:
        return
    core.create_namespaced_resource_quota(
        name,
        {
            "apiVersion": "v1",
            "metadata": {"name": "gpu-portal-quota", "labels": labels},
            "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus), "pods": str(gpus + 100)}},
        },
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        quota = core.read_namespaced_resource_quota("gpu-portal-quota", name)
        if quota.status and quota.status.used is not None:
            return
        time.sleep(0.2)
    sys.exit(f"the quota controller never counted usage in {name}")


def delete_namespace(core, name: str, *, log: Callable[[str], None]) -> None:
    """Delete a benchmark's namespace (what is in it goes with it)."""
    patiently(
        f"delete namespace {name}",
        lambda: core.delete_namespace(name, propagation_policy="Background"),
        log=log,
    )
