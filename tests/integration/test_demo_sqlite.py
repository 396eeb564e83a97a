"""The demo's processes on the embedded SQLite default, all writing at once.

``make demo`` runs a web server, a Celery worker, a Celery worker for webhook deliveries, Celery
beat and the job watcher on one SQLite file. Here they run as the demo starts them, on a fresh
SQLite file, against the devcluster and Redis: threads post GPU jobs through the API as fast as
the server takes them while the worker creates the Jobs, the watcher writes back their states as
they run and finish, and beat's schedule (squeezed to seconds) has the worker sync inventories,
resync jobs, check idle GPUs and reconcile teams, and the webhook worker sweep deliveries. Not
one HTTP answer may be a server error, and no process may log a locked database.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from portal.celery import app as celery_app
from tests.integration.conftest import REPO_ROOT, free_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.devcluster]

SUBMITTING_THREADS = 8
SUBMIT_FOR_SECONDS = 20
GRANTED_GPUS = 6
LOCK_ERRORS = ("database is locked", "database table is locked", "OperationalError")

SETUP = """
import json
from django.contrib.auth.models import User
from clusters.models import Cluster, GpuCapacity
from tenants import quota, services

admin = User.objects.create_superuser("sqlite-admin", "admin@example.com", "sqlite-demo-pw")
lead = User.objects.create_user("sqlite-lead", "lead@example.com", "sqlite-demo-pw")
team = services.team_create(actor=admin, slug=SLUG, name="SQLite demo")
services.membership_set(actor=admin, team=team, user=lead, role="lead")
cluster = Cluster.objects.create(
    name="devcluster",
    kubeconfig_path=KUBECONFIG,
    prometheus_url=PROMETHEUS_URL,
    allowed_registries=["registry.example.com"],
)
GpuCapacity.objects.create(cluster=cluster, resource_name="nvidia.com/gpu", allocatable=32)
request = quota.quota_request_create(
    requested_by=lead, team=team, cluster=cluster, gpus=GPUS, justification="SQLite test."
)
quota.quota_request_approve(reviewer=admin, quota_request=request)
"""


class DemoProcess:
    """One of the demo's processes, its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_line(self, marker: str, timeout: float = 90) -> None:
        def started():
            if self.process.poll() is not None:
                pytest.fail(f"{self.name} exited:\n{self.log()[-3000:]}")
            return marker in self.log()

        wait_for(started, timeout=timeout, interval=0.3, what=f"{self.name} to start")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def sqlite_demo(devcluster, tmp_path):
    """The demo's five processes on a fresh SQLite file, with one team granted GPUs on the
    devcluster. Yields the server's URL, the lead's API token, the team's slug and the
    processes."""
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)
    queue = f"sqlite-demo-{uuid.uuid4().hex[:8]}"
    slug = f"sqlite-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        # Queues of its own: no other worker on this Redis takes these tasks.
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "WEBHOOKS_QUEUE": f"{queue}-webhooks",
        "PYTHONUNBUFFERED": "1",
        # Beat's schedule in seconds, so that the worker writes all along.
        "PORTAL_RECONCILE_SWEEP_SECONDS": "3",
        "PORTAL_INVENTORY_SYNC_SECONDS": "1",
        "PORTAL_IDLE_CHECK_EVERY_SECONDS": "1",
        "GPUJOBS_RESYNC_SECONDS": "1",
        "WEBHOOKS_SWEEP_SECONDS": "1",
        # Its watcher leads the devcluster under a Lease of its own (not the session's), in the
        # portal's namespace, which a cluster admin makes (deploy/namespace.yaml).
        "GPUJOBS_WATCHER_LEASE_NAME": f"{queue}-watcher",
    }
    from tests.integration.portal_identity import install_portal_namespace

    with devcluster.api_client() as api:
        install_portal_namespace(api)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=REPO_ROOT, env=env, check=True)
    setup = SETUP.replace("SLUG", repr(slug)).replace("GPUS", str(GRANTED_GPUS))
    setup = setup.replace("KUBECONFIG", repr(str(devcluster.kubeconfig)))
    setup = setup.replace("PROMETHEUS_URL", repr(devcluster.prometheus_url))
    subprocess.run([*manage, "shell", "-c", setup], cwd=REPO_ROOT, env=env, check=True)

    port = free_port()
    worker_name = f"{queue}@{socket.gethostname()}"
    celery = [sys.executable, "-m", "celery", "-A", "portal"]
    processes = []
    try:
        for name, argv, marker in (
            (
                "web",
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "portal.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                "Application startup complete",
            ),
            (
                "worker",
                [
                    *celery,
                    "worker",
                    "--pool=solo",
                    "--loglevel=INFO",
                    "-n",
                    worker_name,
                    "--without-gossip",
                    "--without-mingle",
                ],
                "ready.",
            ),
            (
                "webhook-worker",
                [
                    *celery,
                    "worker",
                    "--pool=solo",
                    "-Q",
                    f"{queue}-webhooks",
                    "--loglevel=INFO",
                    "-n",
                    f"{queue}-webhooks@{socket.gethostname()}",
                    "--without-gossip",
                    "--without-mingle",
                ],
                "ready.",
            ),
            (
                "beat",
                [*celery, "beat", "--loglevel=INFO", "-s", str(tmp_path / "beat-schedule")],
                "beat: Starting",
            ),
            ("watcher", [*manage, "watch_jobs", "--discover-every", "0.5"], "following GPU jobs"),
        ):
            processes.append(DemoProcess(name, argv, env, tmp_path))
            processes[-1].wait_for_line(marker)
        base = f"http://127.0.0.1:{port}"
        answer = httpx.post(
            f"{base}/api/v1/auth/token/",
            data={"username": "sqlite-lead", "password": "sqlite-demo-pw"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        yield {"url": base, "token": answer.json()["token"], "team": slug, "processes": processes}
    finally:
        for process in reversed(processes):
            process.stop()
        with celery_app.connection_for_write() as conn:
            conn.default_channel.client.delete(queue, f"{queue}-webhooks")
        _delete_namespace(devcluster, slug)


def _delete_namespace(devcluster, name: str) -> None:
    from kubernetes import client

    with devcluster.api_client() as api:
        try:
            client.CoreV1Api(api).delete_namespace(name)
        except client.ApiException as error:
            if error.status != 404:
                raise


def _summary(text: str) -> str:
    """An error page's title (Django's debug page names the exception there), or its start."""
    title = re.search(r"<title>(.*?)</title>", text, re.DOTALL)
    return " ".join(title.group(1).split()) if title else text[:300]


def test_web_worker_beat_and_watcher_write_to_sqlite_at_once_without_lock_errors(sqlite_demo):
    base, team = sqlite_demo["url"], sqlite_demo["team"]
    headers = {"Authorization": f"Token {sqlite_demo['token']}"}
    answers: list[tuple[int, str]] = []
    answers_lock = threading.Lock()
    deadline = time.monotonic() + SUBMIT_FOR_SECONDS

    def submit_until_deadline(thread: int) -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            number = 0
            while time.monotonic() < deadline:
                number += 1
                response = http.post(
                    "/api/v1/jobs/",
                    json={
                        "team": team,
                        "cluster": "devcluster",
                        "name": f"t{thread}-{number}",
                        "image": "registry.example.com/ml/trainer:1.0",
                        "gpus": 1,
                        # The devcluster finishes the pod a second after it runs: the watcher
                        # writes each job's states while the next submissions come in.
                        "annotations": {"devcluster.gpuportal.io/complete-after-seconds": "1"},
                    },
                )
                with answers_lock:
                    answers.append((response.status_code, response.text))
                if response.status_code != 201:
                    time.sleep(0.2)  # over quota until running jobs finish

    with ThreadPoolExecutor(SUBMITTING_THREADS) as pool:
        list(pool.map(submit_until_deadline, range(SUBMITTING_THREADS)))

    server_errors = [(status, _summary(text)) for status, text in answers if status >= 500]
    assert server_errors == []
    # Every refusal is the quota's (the team holds a few GPUs), never anything else.
    refusals = [text for status, text in answers if status != 201]
    assert all("quota" in text for text in refusals), refusals[:3]
    accepted = sum(1 for status, _ in answers if status == 201)
    assert accepted > GRANTED_GPUS  # jobs finished and made room for more: the watcher wrote

    def all_finished():
        response = httpx.get(
            f"{base}/api/v1/jobs/",
            params={"team": team, "page_size": 500},
            headers=headers,
            timeout=30,
        )
        assert response.status_code == 200, response.text
        jobs = response.json()["results"]
        assert len(jobs) == accepted
        return all(job["state"] == "succeeded" for job in jobs)

    wait_for(all_finished, timeout=180, interval=1, what="every accepted job to succeed")

    logs = {p.name: p.log() for p in sqlite_demo["processes"]}
    locked = {
        name: [line for line in log.splitlines() if any(e in line for e in LOCK_ERRORS)][:5]
        for name, log in logs.items()
    }
    assert locked == {name: [] for name in logs}, json.dumps(locked, indent=2)
    # Everyone wrote: the worker created jobs and ran beat's tasks, the watcher saw jobs end.
    assert "gpujobs.tasks.submit_job" in logs["worker"]
    assert "monitoring.tasks.check_idle_gpus" in logs["worker"]
    # Webhook tasks go to the webhook worker alone (the banners list every task: match runs).
    assert "Task webhooks.tasks.send_due_deliveries[" in logs["webhook-worker"]
    assert "Task webhooks.tasks." not in logs["worker"]
    assert "Sending due task" in logs["beat"]
