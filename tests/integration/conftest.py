"""Real services for integration tests: the PostgreSQL test database, a Celery worker process,
the devcluster's admin clients and Prometheus's promtool.

``scripts/services.sh up`` (called by ``make test`` and ``.ci/run``) starts PostgreSQL and Redis
and exports DATABASE_URL and CELERY_BROKER_URL; tests/conftest.py refuses any other database for
the full run, and marks every test using these fixtures so that ``make test-fast`` leaves it out.
"""

import asyncio
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection
from kubernetes import client

from devcluster import real_node
from portal.celery import app as celery_app

REPO_ROOT = Path(__file__).resolve().parents[2]

# A queue of this test session's own: several sessions (developers, CI) may share one Redis, and
# a worker reading another session's database must never take this session's tasks. Workers
# started from here inherit the variable, and with it the queue.
SESSION_QUEUE = f"pytest-{os.getpid()}"
os.environ["CELERY_TASK_DEFAULT_QUEUE"] = SESSION_QUEUE
celery_app.conf.task_default_queue = SESSION_QUEUE
# Webhook deliveries have a queue of their own (settings.WEBHOOKS_QUEUE): the session's is read
# by the session worker too.
SESSION_WEBHOOKS_QUEUE = f"{SESSION_QUEUE}-webhooks"
os.environ["WEBHOOKS_QUEUE"] = SESSION_WEBHOOKS_QUEUE
settings.WEBHOOKS_QUEUE = SESSION_WEBHOOKS_QUEUE
WORKER_NAME = f"{SESSION_QUEUE}@{socket.gethostname()}"
_running_workers: list[subprocess.Popen] = []


def _worker_busy() -> bool:
    """Whether the session worker has tasks queued, reserved or running."""
    with celery_app.connection_for_read() as conn:
        redis = conn.default_channel.client
        queued = redis.llen(SESSION_QUEUE) + redis.llen(SESSION_WEBHOOKS_QUEUE)
    inspect = celery_app.control.inspect(destination=[WORKER_NAME], timeout=2)
    active = (inspect.active() or {}).get(WORKER_NAME, [])
    reserved = (inspect.reserved() or {}).get(WORKER_NAME, [])
    return bool(queued or active or reserved)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Let the session worker finish what a test enqueued before the test's data is flushed:
    a task still writing while the flush truncates the tables can deadlock with it, and would
    leak into the next test."""
    if _running_workers:
        deadline = time.monotonic() + 30
        while _worker_busy() and time.monotonic() < deadline:
            time.sleep(0.1)
    yield


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def postgres_database(django_db_setup):
    """The suite's database, which must be PostgreSQL: row locks, concurrent transactions and
    other processes reading the test's rows are what the tests using it prove."""
    if connection.vendor != "postgresql":
        pytest.fail(
            f"This test needs PostgreSQL, not {connection.vendor}: run it through `make test`.",
            pytrace=False,
        )
    return settings.DATABASES["default"]


def _database_url(db: dict) -> str:
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


class OnePerSession:
    """One process for the whole session, however many places define its fixture. A session
    fixture imported into several conftests and e2e modules is, for pytest, several fixtures:
    each would start a process of its own on the same database (several watchers writing, a
    test that stops "the" watcher leaving another running). The process stops when the last
    of them is done with it."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.users = 0

    @contextlib.contextmanager
    def use(self, start, stop):
        if self.process is None or self.process.poll() is not None:
            self.process = start()
        self.users += 1
        try:
            yield self.process
        finally:
            self.users -= 1
            if self.users == 0:
                process, self.process = self.process, None
                stop(process)


def stop_process(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


_worker = OnePerSession()


@pytest.fixture(scope="session")
def celery_worker_process(postgres_database, tmp_path_factory):
    """A real ``celery worker`` process on the real Redis broker, reading the test database:
    one per session (``OnePerSession``).

    Tests that use it must commit their data (``transactional_db``), as a worker in another
    process only sees committed rows.
    """

    def stop(worker):
        _running_workers.remove(worker)
        stop_process(worker)

    with _worker.use(lambda: _start_worker(postgres_database, tmp_path_factory), stop) as worker:
        yield worker


# Sessions without GPUs run on the devcluster's real node (its only node for CPU work, tainted so
# that nothing else lands there), from images loaded onto it: the worker makes their Jobs so.
SESSIONS_ON_THE_REAL_NODE = {
    "SESSIONS_CPU_TOLERATIONS": json.dumps([real_node.TOLERATION]),
    "SESSIONS_CPU_NODE_SELECTOR": json.dumps({real_node.LABEL: "true"}),
    "SESSIONS_IMAGE_PULL_POLICY": "Never",
}


def _start_worker(postgres_database, tmp_path_factory) -> subprocess.Popen:
    broker = settings.CELERY_BROKER_URL
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)
    celery_app.control.purge()
    log_path = tmp_path_factory.mktemp("celery") / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(postgres_database),
        "CELERY_BROKER_URL": broker,
        "MONITORING_USAGE_CACHE_SECONDS": "0",  # as in the tests' own process
        **SESSIONS_ON_THE_REAL_NODE,
        "PYTHONUNBUFFERED": "1",
    }
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--pool=solo",
                "-Q",
                f"{SESSION_QUEUE},{SESSION_WEBHOOKS_QUEUE}",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "-n",
                WORKER_NAME,
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while "ready." not in log_path.read_text():
        if worker.poll() is not None or time.monotonic() > deadline:
            worker.kill()
            pytest.fail(f"Celery worker did not start:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)
    _running_workers.append(worker)
    return worker


# A Redis database for the tests that count in Redis (the broker uses database 0).
REDIS_TEST_DB = 15


@pytest.fixture
def redis_url(settings) -> str:
    """The suite's Redis (a database of its own, without the portal's keys before and after
    the test), as the portal's shared-counts Redis (``PORTAL_REDIS_URL``)."""
    url = settings.CELERY_BROKER_URL.rsplit("/", 1)[0] + f"/{REDIS_TEST_DB}"
    client = redis.Redis.from_url(url)

    def clear():
        for key in client.scan_iter(match="gpuportal:*"):
            client.delete(key)

    try:
        clear()
    except redis.ConnectionError as error:
        pytest.fail(f"Redis at {url} does not answer ({error}): start it with `make test`.")
    settings.PORTAL_REDIS_URL = url
    yield url
    clear()
    client.close()


@pytest.fixture(scope="session")
def promtool() -> str:
    """Prometheus's own checker, from Debian's prometheus package; the full suite needs it."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool is missing: install Debian's prometheus package (scripts/bootstrap.sh does)",
            pytrace=False,
        )
    return path


def run_in_new_loop(coroutine):
    """Run ``coroutine`` to its end on an event loop of its own, in a thread of its own: the
    browser tests leave Playwright's loop running in the main thread for the whole session."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def free_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, *, timeout: float = 30.0, interval: float = 0.2, what: str = "condition"):
    """Poll until ``predicate()`` is truthy and return its value; fail the test after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def backend_pid() -> int:
    """This thread's PostgreSQL backend: its locks are what a race test waits on."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def waiting_for_a_lock(pid: int) -> bool:
    """Whether PostgreSQL backend ``pid`` waits for a lock another transaction holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", [pid])
        return cursor.fetchone()[0] > 0


# --- the devcluster, as its admin: for setting up and for checking what the cluster holds ---------


@pytest.fixture(scope="session")
def k8s(devcluster):
    """The devcluster's admin client. A session starts without the admission policies that an
    earlier session, killed before its end, may have left on the shared cluster."""
    from tests.integration.kube import remove_admission_objects

    api = devcluster.api_client()
    remove_admission_objects(api, settings.PORTAL_NAME)
    yield api
    api.close()


@pytest.fixture(scope="session")
def core(k8s):
    return client.CoreV1Api(k8s)


@pytest.fixture(scope="session")
def batch(k8s):
    return client.BatchV1Api(k8s)
